"""What the NumPy kernels share: window geometry, the phase maps of a padded strided map,
and the passes that spread a window layer's work over the worker threads in cache-sized
blocks; the row view of a map and its column sums (conv and depthwise).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from pytest_gostcnn.model.layers import Layer

from ...common import Window
from ..workspace import Workspace

# A block of a window pass holds about this many output elements (512 KiB of float32):
# large enough that NumPy's per-call cost and the GIL are small against the arithmetic,
# small enough that the block, its windows and a temporary stay in cache across the
# Rx*Ry offsets.
BLOCK_ELEMENTS = 1 << 17


@dataclass(frozen=True)
class Geometry:
    """A window pass from an input map (x, y) to an output map: window, stride, padding."""

    in_xy: tuple[int, int]
    out_xy: tuple[int, int]
    window: tuple[int, int]
    stride: int
    pad: tuple[int, int]

    @classmethod
    def of(cls, layer: Layer) -> Geometry:
        w = Window.of(layer)
        return cls((w.x, w.y), (w.x_out, w.y_out), (w.rx, w.ry), w.s, (w.px, w.py))

    def adjoint(self) -> Geometry:
        """The stride-1 pass from OUT_D back to IN_D, with the window flipped.

        IN_D[x] = sum over r of OUT_D[x + P - r] * W[r]; with r' = R-1-r that is a window
        over OUT_D padded by R-1-P (negative: cropped), read with the flipped filters.
        """
        assert self.stride == 1
        (rx, ry), (px, py) = self.window, self.pad
        return Geometry(self.out_xy, self.in_xy, self.window, 1, (rx - 1 - px, ry - 1 - py))

    @property
    def overlapping(self) -> bool:
        """Whether an input position can lie in two windows (the scatters then accumulate)."""
        return self.stride < max(self.window)

    def spans(self) -> Iterator[tuple[int, int, tuple, tuple]]:
        """``(rx, ry, out_index, in_index)`` for every window offset, clipped to the bounds.

        ``out[:, *out_index]`` are the outputs whose offset-(rx, ry) input lies in the
        map, ``inp[:, *in_index]`` those inputs. An offset with no such output is skipped:
        it reads only padding, which adds nothing.
        """
        (x, y), (x_out, y_out) = self.in_xy, self.out_xy
        for rx in range(self.window[0]):
            span_x = _span(x_out, x, rx, self.stride, self.pad[0], 0, x_out)
            if span_x is None:
                continue
            for ry in range(self.window[1]):
                span_y = _span(y_out, y, ry, self.stride, self.pad[1], 0, y_out)
                if span_y is not None:
                    yield rx, ry, (span_x[0], span_y[0]), (span_x[1], span_y[1])


def _span(n_out: int, n_in: int, r: int, s: int, p: int, lo: int, hi: int):
    """Outputs o in [lo, hi) with o*s + r - p in [0, n_in): their slice and the inputs'."""
    start = max(lo, -((r - p) // s))
    stop = min(hi, (n_in - 1 - r + p) // s + 1)
    if stop <= start:
        return None
    first = start * s + r - p
    return slice(start, stop), slice(first, first + s * (stop - start - 1) + 1, s)


def _rows(matrix_like: np.ndarray) -> np.ndarray:
    """A map [B][X][Y][L] as the matrix [B*X*Y][L] (a view where the strides allow)."""
    return matrix_like.reshape(-1, matrix_like.shape[-1])


def _column_sums(ws: Workspace, rows: np.ndarray) -> np.ndarray:
    """The sum over the rows of [N][F] (BIASES_D over B, X, Y) as one BLAS GEMV."""
    return ws.ones(rows.shape[0], rows.dtype) @ rows


class Phases:
    """A map padded with zeros by P and split by the stride S into S*S phase maps.

    ``phase[a][c][q][t] = padded[q*S + a][t*S + c]``: the window at offset (rx, ry) of
    every output is then one slice of one phase with unit strides, whose rows NumPy walks
    as long contiguous runs (a strided slice of the map itself has runs of only L).
    Without padding or stride a gather reads the map as it is; a scatter (``scatter``)
    always has its own buffer to accumulate in.
    """

    def __init__(
        self,
        ws: Workspace,
        name: str,
        geometry: Geometry,
        images: int,
        like: np.ndarray,
        scatter: bool = False,
    ) -> None:
        self.geometry = geometry
        s = geometry.stride
        (x, y), (px, py) = geometry.in_xy, geometry.pad
        self.copy = scatter or s > 1 or (px, py) != (0, 0)
        self.phase_xy = (-(-(x + 2 * px) // s), -(-(y + 2 * py) // s))
        self.maps: np.ndarray | None = None
        if self.copy:
            self.maps = ws.scratch(name, (s, s, images, *self.phase_xy, like.shape[3]), like.dtype)

    def _parts(self) -> Iterator[tuple[int, int, tuple | None]]:
        """``(a, c, (phase_index, map_index))`` per phase; None where it holds only padding."""
        g, s = self.geometry, self.geometry.stride
        for a in range(s):
            span_x = _span(self.phase_xy[0], g.in_xy[0], a, s, g.pad[0], 0, self.phase_xy[0])
            for c in range(s):
                span_y = _span(self.phase_xy[1], g.in_xy[1], c, s, g.pad[1], 0, self.phase_xy[1])
                if span_x is None or span_y is None:
                    yield a, c, None
                else:
                    yield a, c, ((span_x[0], span_y[0]), (span_x[1], span_y[1]))

    def split(self, images: np.ndarray) -> None:
        """Fill the phases from ``images`` [n][X][Y][L], zeros where the padding lies."""
        if not self.copy:
            self.maps = images[None, None]
            return
        for a, c, index in self._parts():
            phase = self.maps[a, c, : len(images)]
            if index is None:
                phase[...] = 0
                continue
            (qx, qy), (mx, my) = index
            phase[:, : qx.start] = 0
            phase[:, qx.stop :] = 0
            phase[:, qx, : qy.start] = 0
            phase[:, qx, qy.stop :] = 0
            phase[:, qx, qy] = images[:, mx, my]

    def zero(self, images: int) -> None:
        """All phases zero: the start of a scatter (``window`` views then accumulate)."""
        self.maps[:, :, :images] = 0

    def merge(self, images: np.ndarray) -> None:
        """Write the in-bounds positions of the phases to ``images`` [n][X][Y][L]."""
        for a, c, index in self._parts():
            if index is not None:
                (qx, qy), (mx, my) = index
                images[:, mx, my] = self.maps[a, c, : len(images), qx, qy]

    def window(self, rx: int, ry: int, images: int, rows: slice) -> np.ndarray:
        """[n][rows][Yout][L]: the padded map at (x*S + rx, y*S + ry) for output rows ``rows``."""
        s = self.geometry.stride
        qx, qy = rx // s, ry // s
        return self.maps[
            rx % s,
            ry % s,
            :images,
            qx + rows.start : qx + rows.stop,
            qy : qy + self.geometry.out_xy[1],
        ]


def _window_pass(
    ws: Workspace,
    batch: int,
    geometry: Geometry,
    channels: int,
    work: Callable[[int, int, int, slice], None],
) -> None:
    """``work(part, b0, b1, rows)`` over groups of whole images and blocks of output rows.

    Groups of images are spread over the threads (``part`` names the thread's scratch);
    each group's output is cut into blocks of rows of about BLOCK_ELEMENTS elements.
    """
    x_out, y_out = geometry.out_xy
    image = x_out * y_out * channels
    per_group = max(1, BLOCK_ELEMENTS // image)
    rows = max(1, BLOCK_ELEMENTS // (y_out * channels))
    groups = [(b, min(b + per_group, batch)) for b in range(0, batch, per_group)]

    def task(part: int, start: int, stop: int) -> None:
        for b0, b1 in groups[start:stop]:
            blocks = [slice(r, min(r + rows, x_out)) for r in range(0, x_out, rows)]
            work(part, b0, b1, blocks)

    ws.parallel(task, len(groups), batch * image * geometry.window[0] * geometry.window[1])


def _flat_pass(
    ws: Workspace, size: int, step: Callable[[int, slice], None], minimum: int | None = None
) -> None:
    """``step(part, block)`` over ``range(size)`` in blocks, spread over the threads from
    ``minimum`` elements (``Workspace.parallel``)."""

    def task(part: int, start: int, stop: int) -> None:
        for first in range(start, stop, BLOCK_ELEMENTS):
            step(part, slice(first, min(first + BLOCK_ELEMENTS, stop)))

    ws.parallel(task, size, size, minimum)


def _offsets(geometry: Geometry) -> list[tuple[int, int]]:
    return [(rx, ry) for rx in range(geometry.window[0]) for ry in range(geometry.window[1])]
