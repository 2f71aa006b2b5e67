"""Each computing cell's own image set (section 9.3), generated on demand, and the output
residuals of its training rounds.

Image ``i`` of cell ``c`` comes from a counter-based generator (Philox) keyed by (seed, cell)
at counter ``i``: any image is made directly, no two cells share a set, and the 1,000,000
images never exist at once. Values are U(-127, 128), as section 8 draws a network input.
The residual of round ``r`` comes from the same key at a counter far above every image's,
so an audit rebuilds any round's residual from (seed, cell, r) alone.
"""

from __future__ import annotations

import zlib

import numpy as np

from pytest_gostcnn.model.data import INPUT_RANGE

# Philox advances its counter once per four 64-bit words; an image of n values uses fewer
# than n counter steps, so spacing images this far apart keeps every image's stream apart
# for maps up to 2**40 values.
_COUNTER_STRIDE = 2**40
# Residuals start here: above the counters of 2**150 images, the same stride apart.
_RESIDUAL_COUNTERS = 2**190


class ImageSet:
    """The image set of one cell: ``batch(start, count)`` returns images start..start+count-1."""

    def __init__(self, shape: tuple[int, int, int], seed: int, cell: int = 0) -> None:
        self.shape = shape
        self.key = (seed << 32) | cell

    def image(self, index: int) -> np.ndarray:
        """Image ``index`` as float32 [X][Y][L]."""
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


def image_checksum(image: np.ndarray) -> str:
    """The checksum a report keeps of a cell's first timed image (cells must differ)."""
    return f"{zlib.crc32(image.tobytes()):08x}"


class ResidualSet:
    """The output residuals of one cell's training rounds: ``batch(r, shape)`` is round
    ``r``'s, U(-1, 1) x ``scale`` in float64 (rounded to the data type by ``to_device``)."""

    def __init__(self, seed: int, cell: int = 0, scale: float = 1.0) -> None:
        self.key = (seed << 32) | cell
        self.scale = scale

    def batch(self, number: int, shape: tuple[int, ...]) -> np.ndarray:
        """Round ``number``'s residual (``number`` >= 0), shaped ``shape`` = (B, X, Y, L)."""
        if number < 0:
            raise ValueError(f"round number {number}: residuals are numbered from 0")
        counter = _RESIDUAL_COUNTERS + number * _COUNTER_STRIDE
        bits = np.random.Philox(key=self.key, counter=counter)
        return np.random.Generator(bits).uniform(-1.0, 1.0, size=shape) * self.scale
