"""The images and output residual of each timed round (section 9.3), drawn in the round's
setup from a key nobody holds before it (standard.md §7.7, fifth release).

A round's data comes from a counter-based generator (Philox) keyed by the round's own
128-bit key, drawn from the operating system's randomness when the round is set up: no
object of the process can tell a round's images before then, so no work on them can be
done ahead of the round's clock. Image ``i`` of a round is at counter ``i`` x a stride, so
a check rebuilds one image, or the whole batch, from the key alone; the residual lies at a
counter above every image's. The key is kept only while a check may need it.
"""

from __future__ import annotations

import random
import zlib

import numpy as np

from pytest_gostcnn.model.data import INPUT_RANGE

# Philox advances its counter once per four 64-bit words; an image of n values uses fewer
# than n counter steps, so spacing images this far apart keeps every image's stream apart
# for maps up to 2**40 values.
_COUNTER_STRIDE = 2**40
_RESIDUAL_COUNTER = 2**120  # above the counters of 2**80 images


def round_key(randomness: random.Random | None = None) -> int:
    """A round's data key: 128 bits of the operating system's randomness (the project's tests give
    a seeded generator)."""
    return (randomness or random.SystemRandom()).getrandbits(128)


def seed_key(seed: int, cell: int) -> int:
    """The key of data that follows from the session's seed alone (an integer type's
    calibration batch), never a timed round's."""
    return (seed << 32) | cell


class ImageSet:
    """The images of one key: ``batch(start, count)`` returns images start..start+count-1."""

    def __init__(self, shape: tuple[int, int, int], key: int) -> None:
        self.shape = shape
        self.key = key

    def image(self, index: int) -> np.ndarray:
        """Image ``index`` as float32 [X][Y][L], U(-127, 128) as section 8 draws an input."""
        bits = np.random.Philox(key=self.key, counter=index * _COUNTER_STRIDE)
        low, high = INPUT_RANGE
        values = np.random.Generator(bits).random(self.shape, dtype=np.float32)
        return values * np.float32(high - low) + np.float32(low)

    def batch(self, start: int, count: int) -> np.ndarray:
        """Images ``start`` .. ``start + count - 1`` as float32 [B][X][Y][L]."""
        out = np.empty((count, *self.shape), dtype=np.float32)
        for offset in range(count):
            out[offset] = self.image(start + offset)
        return out


def residual(key: int, shape: tuple[int, ...], scale: float) -> np.ndarray:
    """The output residual of the round keyed ``key``: U(-1, 1) x ``scale`` in float64
    (rounded to the data type by ``to_device``), shaped ``shape`` = (B, X, Y, L)."""
    bits = np.random.Philox(key=key, counter=_RESIDUAL_COUNTER)
    return np.random.Generator(bits).uniform(-1.0, 1.0, size=shape) * scale


def image_checksum(image: np.ndarray) -> str:
    """The checksum a report keeps of a cell's first timed image (cells must differ)."""
    return f"{zlib.crc32(image.tobytes()):08x}"
