"""The layer kernels of the NumPy backend: Appendix A's arithmetic, the work ordered for
BLAS, the caches and the worker threads (docs/performance.md, "What the backend does").

Arrays are the standard's, channels last (docs/standard.md §2). Kernels never write into
their arguments; what they return is theirs alone, fresh or a result nobody holds any more
(``Workspace.result``), never scratch. Every kernel computes in its arguments' dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from pytest_gostcnn.model.layers import Layer

from ..common import (
    Window,
    channel_parts,
    eltwise_in_residuals,
    from_lxy,
    is_global,
    is_pointwise,
    lxy,
    shuffle,
)
from .workspace import Workspace

# A block of a window pass holds about this many output elements (512 KiB of float32):
# large enough that NumPy's per-call cost and the GIL are small against the arithmetic,
# small enough that the block, its windows and a temporary stay in cache across the
# Rx*Ry offsets.
BLOCK_ELEMENTS = 1 << 17


# Window geometry. ------------------------------------------------------------------------


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


def _temporary(ws: Workspace, part: int, like: np.ndarray) -> np.ndarray:
    """Per-thread scratch shaped like ``like`` (the caller's view of a block)."""
    return ws.scratch(f"block{part}", like.shape, like.dtype)


def _rows(matrix_like: np.ndarray) -> np.ndarray:
    """A map [B][X][Y][L] as the matrix [B*X*Y][L] (a view where the strides allow)."""
    return matrix_like.reshape(-1, matrix_like.shape[-1])


def _windows_view(source: np.ndarray, geometry: Geometry) -> np.ndarray:
    """[n][Xout][Yout][Rx][Ry][L] view of an (already padded) ``source`` [n][X][Y][L]."""
    n, _, _, channels = source.shape
    sb, sx, sy, sl = source.strides
    s = geometry.stride
    return as_strided(
        source,
        shape=(n, *geometry.out_xy, *geometry.window, channels),
        strides=(sb, sx * s, sy * s, sx, sy, sl),
        writeable=False,
    )


# Convolution (section 6.1): im2col + GEMM. ----------------------------------------------


def _pad_into(padded: np.ndarray, images: np.ndarray, pad: tuple[int, int]) -> None:
    """``padded`` = ``images`` with a zero border of ``pad`` (negative pad: cropped)."""
    px, py = pad
    x, y = images.shape[1:3]
    src = images[:, max(-px, 0) : x - max(-px, 0), max(-py, 0) : y - max(-py, 0)]
    px, py = max(px, 0), max(py, 0)
    if px:
        padded[:, :px] = 0
        padded[:, -px:] = 0
    if py:
        padded[:, px : padded.shape[1] - px, :py] = 0
        padded[:, px : padded.shape[1] - px, -py:] = 0
    padded[:, px : px + src.shape[1], py : py + src.shape[2]] = src


def _im2col_chunks(
    ws: Workspace, source: np.ndarray, geometry: Geometry, with_ones: bool
) -> Iterator[tuple[int, int, np.ndarray]]:
    """Yield ``(c0, n, cols)``: im2col of images ``c0 .. c0+n-1`` of ``source``.

    ``cols`` is [n*Xout*Yout][Rx*Ry*L (+1)], its columns in (rx, ry, l) order, FILTERS' own,
    plus a last column of ones when ``with_ones``. It lives in the workspace: use it before
    the next chunk. Chunks are as many whole images as fit the workspace.
    """
    batch, _, _, channels = source.shape
    (x_out, y_out), (rx, ry) = geometry.out_xy, geometry.window
    positions = x_out * y_out
    depth = rx * ry * channels
    width = depth + with_ones
    padding = geometry.pad != (0, 0)
    padded_xy = (source.shape[1] + 2 * geometry.pad[0], source.shape[2] + 2 * geometry.pad[1])
    padded_size = padded_xy[0] * padded_xy[1] * channels if padding else 0
    chunk = ws.images_per_chunk((positions * width + padded_size) * source.itemsize, batch)
    for c0 in range(0, batch, chunk):
        n = min(chunk, batch - c0)
        cols = ws.scratch("cols", (n * positions, width), source.dtype)
        padded = ws.scratch("padded", (n, *padded_xy, channels), source.dtype) if padding else None
        row, column = cols.strides
        cols6 = as_strided(
            cols,
            shape=(n, x_out, y_out, rx, ry, channels),
            strides=(
                positions * row,
                y_out * row,
                row,
                ry * channels * column,
                channels * column,
                column,
            ),
        )

        def fill(part: int, start: int, stop: int, c0=c0, cols=cols, cols6=cols6, padded=padded):
            for i in range(start, stop):
                image = source[c0 + i : c0 + i + 1]
                if padded is not None:
                    _pad_into(padded[i : i + 1], image, geometry.pad)
                    image = padded[i : i + 1]
                np.copyto(cols6[i : i + 1], _windows_view(image, geometry))
            if with_ones:
                cols[start * positions : stop * positions, depth] = 1

        ws.parallel(fill, n, n * positions * width)
        yield c0, n, cols


def _im2col_gemm(
    ws: Workspace,
    source: np.ndarray,
    geometry: Geometry,
    matrix: np.ndarray,
    out: np.ndarray,
    with_ones: bool,
) -> None:
    """``out`` [B][Xout][Yout][F] = im2col(``source``) @ ``matrix``, chunk by chunk."""
    for c0, n, cols in _im2col_chunks(ws, source, geometry, with_ones):
        np.matmul(cols, matrix, out=_rows(out[c0 : c0 + n]))


def _with_bias_row(ws: Workspace, matrix: np.ndarray, biases: np.ndarray) -> np.ndarray:
    stacked = ws.scratch("weights", (matrix.shape[0] + 1, matrix.shape[1]), matrix.dtype)
    stacked[:-1] = matrix
    stacked[-1] = biases
    return stacked


def conv_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    x = inputs[0]
    filters, biases = weights["filters"], weights["biases"]
    out = ws.result((x.shape[0], *layer.out_shapes[0]), x.dtype)
    matrix = filters.reshape(-1, filters.shape[-1])
    if is_pointwise(layer):
        out_rows = _rows(out)
        np.matmul(_rows(x), matrix, out=out_rows)
        _add_bias(ws, out_rows, biases)
    else:
        stacked = _with_bias_row(ws, matrix, biases)
        _im2col_gemm(ws, x, Geometry.of(layer), stacked, out, with_ones=True)
    return [out]


def conv_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    out_residual, filters = out_residuals[0], weights["filters"]
    batch = out_residual.shape[0]
    geometry = Geometry.of(layer)
    if is_pointwise(layer):
        matrix = filters.reshape(filters.shape[2], filters.shape[3])
        in_residual = ws.result((batch, *layer.in_shapes[0]), out_residual.dtype)
        np.matmul(_rows(out_residual), matrix.T, out=_rows(in_residual))
        return [in_residual]
    rx, ry, channels, features = filters.shape
    if geometry.stride == 1 and features <= channels:
        # IN_D is the convolution of OUT_D with FILTERS flipped in x and y, L and F swapped:
        # an im2col of OUT_D, Rx*Ry*F wide. Where F > L the GEMM of col2im, Rx*Ry*L wide,
        # moves less memory, as it does for every strided layer.
        flipped = ws.scratch("weights", (rx, ry, features, channels), filters.dtype)
        np.copyto(flipped, filters[::-1, ::-1].transpose(0, 1, 3, 2))
        in_residual = ws.result((batch, *layer.in_shapes[0]), out_residual.dtype)
        _im2col_gemm(
            ws,
            out_residual,
            geometry.adjoint(),
            flipped.reshape(-1, channels),
            in_residual,
            with_ones=False,
        )
        return [in_residual]
    return [_col2im_backward(ws, layer, geometry, out_residual, filters)]


def _col2im_backward(
    ws: Workspace, layer: Layer, geometry: Geometry, out_residual: np.ndarray, filters: np.ndarray
) -> np.ndarray:
    """IN_D of a strided convolution: a GEMM of OUT_D with FILTERS, columns scattered back.

    Each window offset adds one slice of the GEMM's result into IN_D. NumPy's speed there is
    the length of the runs it adds: with few channels (the network's first layer, L = 3)
    the result is laid out channels first, so runs are rows of the map, not L channels;
    and the padded IN_D is held as S*S phase maps (padded position S*q + a in phase a,
    index q), where every offset's slice is a unit-stride block, not a stride-S lattice.
    """
    batch = out_residual.shape[0]
    rx, ry, channels, features = filters.shape
    channels_first = geometry.out_xy[1] > channels
    matrix = filters.reshape(-1, features)
    positions = geometry.out_xy[0] * geometry.out_xy[1]
    depth = rx * ry * channels
    x, y = geometry.in_xy
    px, py = geometry.pad
    s = geometry.stride
    padded_xy = (
        max(x + 2 * px, (geometry.out_xy[0] - 1) * s + rx),
        max(y + 2 * py, (geometry.out_xy[1] - 1) * s + ry),
    )
    phase_xy = (-(-padded_xy[0] // s), -(-padded_xy[1] // s))
    phase_spans = [
        ((a, b), (span_x[0], span_y[0]), (span_x[1], span_y[1]))
        for a in range(s)
        if (span_x := _phase_span(x, px, s, a))
        for b in range(s)
        if (span_y := _phase_span(y, py, s, b))
    ]
    in_residual = ws.result((batch, x, y, channels), out_residual.dtype)
    if not channels_first:
        in_residual[...] = 0  # the scatter accumulates
    spans = list(geometry.spans())
    per_image = positions * depth + (
        channels * padded_xy[0] * padded_xy[1] if channels_first else 0
    )
    chunk = ws.images_per_chunk(per_image * out_residual.itemsize, batch)
    for c0 in range(0, batch, chunk):
        n = min(chunk, batch - c0)
        residual_rows = _rows(out_residual[c0 : c0 + n])
        if channels_first:
            cols = ws.scratch("cols", (depth, n * positions), out_residual.dtype)
            np.matmul(matrix, residual_rows.T, out=cols)
            cols6 = cols.reshape(rx, ry, channels, n, *geometry.out_xy)
            padded = ws.scratch("padded", (s, s, channels, n, *phase_xy), out_residual.dtype)
        else:
            cols = ws.scratch("cols", (n * positions, depth), out_residual.dtype)
            np.matmul(residual_rows, matrix.T, out=cols)
            cols6 = cols.reshape(n, *geometry.out_xy, rx, ry, channels)
            padded = None

        def scatter(part: int, start: int, stop: int, c0=c0, cols6=cols6, padded=padded) -> None:
            if channels_first:
                phases = padded[:, :, :, start:stop]
                phases[...] = 0
                x_out, y_out = geometry.out_xy
                for ox in range(rx):
                    for oy in range(ry):
                        qx, qy = ox // s, oy // s
                        view = phases[ox % s, oy % s, :, :, qx : qx + x_out, qy : qy + y_out]
                        np.add(view, cols6[ox, oy, :, start:stop], out=view)
                target = in_residual[c0 + start : c0 + stop]
                for (a, b), (x_in, y_in), (q_x, q_y) in phase_spans:
                    for channel in range(channels):
                        np.copyto(
                            target[:, x_in, y_in, channel], phases[a, b, channel, :, q_x, q_y]
                        )
                return
            target = in_residual[c0 + start : c0 + stop]
            source = cols6[start:stop]
            for ox, oy, (x_out, y_out), (x_in, y_in) in spans:
                view = target[:, x_in, y_in]
                if geometry.overlapping:
                    np.add(view, source[:, x_out, y_out, ox, oy], out=view)
                else:
                    np.copyto(view, source[:, x_out, y_out, ox, oy])

        ws.parallel(scatter, n, n * positions * depth)
    return in_residual


def _phase_span(n_in: int, pad: int, s: int, a: int) -> tuple[slice, slice] | None:
    """Inputs x whose padded position x + pad is s*q + a: their slice, and the q's slice."""
    first_q = -((a - pad) // s)  # the smallest q with s*q + a >= pad
    stop_q = -((a - pad - n_in) // s)  # one past the largest q with s*q + a < pad + n_in
    if stop_q <= first_q:
        return None
    first_x = s * first_q + a - pad
    return slice(first_x, first_x + s * (stop_q - first_q - 1) + 1, s), slice(first_q, stop_q)


def conv_gradient(ws: Workspace, layer: Layer, inputs: list, out_residuals: list) -> dict:
    x, out_residual = inputs[0], out_residuals[0]
    rx, ry, channels, features = layer.weight_shapes["filters"]
    if is_pointwise(layer):
        residual_rows = _rows(out_residual)
        filters_grad = _transposed_product(_rows(x), residual_rows)
        filters_grad = filters_grad.reshape(rx, ry, channels, features)
        return {"filters": filters_grad, "biases": _column_sums(ws, residual_rows)}
    depth = rx * ry * channels
    # [im2col(IN) | 1]^T @ OUT_D holds FILTERS_D over BIASES_D; summed chunk by chunk.
    total = np.zeros((depth + 1, features), dtype=x.dtype)
    partial = np.empty_like(total)
    for c0, n, cols in _im2col_chunks(ws, x, Geometry.of(layer), with_ones=True):
        _transposed_product(cols, _rows(out_residual[c0 : c0 + n]), out=partial)
        np.add(total, partial, out=total)
    return {
        "filters": total[:depth].reshape(rx, ry, channels, features),
        "biases": total[depth].copy(),
    }


def _transposed_product(
    a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    """``a.T @ b`` for the tall [N][K] and [N][F] of a weight gradient.

    OpenBLAS runs this reduction over N up to 4x slower when the product has fewer rows
    than columns (K < F: a widening 1x1 convolution), so such a product is computed as
    ``(b.T @ a).T`` (docs/performance.md, the canonical set).
    """
    if a.shape[1] >= b.shape[1]:
        return np.matmul(a.T, b, out=out)
    product = (b.T @ a).T
    if out is None:
        return product
    np.copyto(out, product)
    return out


def _add_bias(ws: Workspace, rows: np.ndarray, biases: np.ndarray) -> None:
    """``rows`` [N][F] += BIASES, in place, split over the threads."""

    def task(part: int, start: int, stop: int) -> None:
        np.add(rows[start:stop], biases, out=rows[start:stop])

    ws.parallel(task, rows.shape[0], rows.size)


def _column_sums(ws: Workspace, rows: np.ndarray) -> np.ndarray:
    """The sum over the rows of [N][F] (BIASES_D over B, X, Y) as one BLAS GEMV."""
    return ws.ones(rows.shape[0], rows.dtype) @ rows


# Window passes: depthwise convolution and pooling. ---------------------------------------


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


def _offsets(geometry: Geometry) -> list[tuple[int, int]]:
    return [(rx, ry) for rx in range(geometry.window[0]) for ry in range(geometry.window[1])]


def _tiled(vector: np.ndarray, count: int) -> np.ndarray:
    """[..][L] repeated ``count`` times along a new next-to-last axis, contiguous.

    Multiplying a [rows][Y][L] view by it lets NumPy run over Y*L elements at a time, where
    broadcasting the [L] vector itself gives inner loops of L.
    """
    shape = (*vector.shape[:-1], count, vector.shape[-1])
    return np.ascontiguousarray(np.broadcast_to(vector[..., None, :], shape))


def _depthwise_gather(
    ws: Workspace,
    source: np.ndarray,
    geometry: Geometry,
    filters: np.ndarray,
    biases: np.ndarray | None,
    out: np.ndarray,
) -> None:
    """``out`` = BIASES + the sum over offsets of ``source``'s windows * FILTERS[rx][ry]."""
    y_out, channels = geometry.out_xy[1], out.shape[3]
    tiled = _tiled(filters, y_out)
    bias_row = None if biases is None else _tiled(biases, y_out)
    offsets = _offsets(geometry)

    def work(part: int, b0: int, b1: int, blocks: list[slice]) -> None:
        n = b1 - b0
        phases = Phases(ws, f"phases{part}", geometry, n, source)
        phases.split(source[b0:b1])
        for rows in blocks:
            target = out[b0:b1, rows]
            product = _temporary(ws, part, target)
            (rx, ry), *rest = offsets
            np.multiply(phases.window(rx, ry, n, rows), tiled[rx, ry], out=target)
            for rx, ry in rest:
                np.multiply(phases.window(rx, ry, n, rows), tiled[rx, ry], out=product)
                np.add(target, product, out=target)
            if bias_row is not None:
                np.add(target, bias_row, out=target)

    _window_pass(ws, out.shape[0], geometry, channels, work)


def depthwise_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    x = inputs[0]
    out = ws.result((x.shape[0], *layer.out_shapes[0]), x.dtype)
    _depthwise_gather(ws, x, Geometry.of(layer), weights["filters"], weights["biases"], out)
    return [out]


def depthwise_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    out_residual, filters = out_residuals[0], weights["filters"]
    batch = out_residual.shape[0]
    geometry = Geometry.of(layer)
    in_residual = ws.result((batch, *layer.in_shapes[0]), out_residual.dtype)
    if geometry.stride == 1:
        # A gather over OUT_D with the window flipped (Geometry.adjoint): nothing accumulates.
        _depthwise_gather(
            ws, out_residual, geometry.adjoint(), filters[::-1, ::-1], None, in_residual
        )
        return [in_residual]
    tiled = _tiled(filters, geometry.out_xy[1])
    all_rows = [slice(0, geometry.out_xy[0])]

    def work(part: int, b0: int, b1: int, blocks: list[slice]) -> None:
        n = b1 - b0
        phases = Phases(ws, f"phases{part}", geometry, n, out_residual, scatter=True)
        phases.zero(n)
        residual = out_residual[b0:b1]
        product = _temporary(ws, part, residual)
        for rx, ry in _offsets(geometry):
            target = phases.window(rx, ry, n, all_rows[0])
            np.multiply(residual, tiled[rx, ry], out=product)
            np.add(target, product, out=target)
        phases.merge(in_residual[b0:b1])

    _window_pass(ws, batch, geometry, in_residual.shape[3], work)
    return [in_residual]


def depthwise_gradient(ws: Workspace, layer: Layer, inputs: list, out_residuals: list) -> dict:
    x, out_residual = inputs[0], out_residuals[0]
    geometry = Geometry.of(layer)
    (_, y_out), channels = geometry.out_xy, x.shape[3]
    offsets = _offsets(geometry)
    # Per thread and offset, sums over images and rows; the Y axis is summed at the end.
    sums = np.zeros((ws.threads, len(offsets), y_out * channels), dtype=x.dtype)

    def work(part: int, b0: int, b1: int, blocks: list[slice]) -> None:
        n = b1 - b0
        phases = Phases(ws, f"phases{part}", geometry, n, x)
        phases.split(x[b0:b1])
        for rows in blocks:
            residual = out_residual[b0:b1, rows]
            product = _temporary(ws, part, residual)
            for k, (rx, ry) in enumerate(offsets):
                np.multiply(phases.window(rx, ry, n, rows), residual, out=product)
                sums[part, k] += np.add.reduce(product.reshape(-1, y_out * channels), axis=0)

    _window_pass(ws, x.shape[0], geometry, channels, work)
    filters_grad = sums.sum(axis=0).reshape(len(offsets), y_out, channels).sum(axis=1)
    return {
        "filters": filters_grad.reshape(layer.weight_shapes["filters"]),
        "biases": _column_sums(ws, _rows(out_residual)),
    }


# Max pooling (section 6.2): padding counts as the value 0 (docs/standard.md §4; Phases' zeros).


def maxpool_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    return [_reduce_windows(ws, layer, inputs[0], np.maximum)]


def _reduce_windows(ws: Workspace, layer: Layer, x: np.ndarray, combine, scale=None):
    """Combine (max or add) the Rx*Ry window offsets of ``x``, then divide by ``scale``."""
    geometry = Geometry.of(layer)
    out = ws.result((x.shape[0], *layer.out_shapes[0]), x.dtype)

    def work(part: int, b0: int, b1: int, blocks: list[slice]) -> None:
        n = b1 - b0
        phases = Phases(ws, f"phases{part}", geometry, n, x)
        phases.split(x[b0:b1])
        for rows in blocks:
            target = out[b0:b1, rows]
            (rx, ry), *rest = _offsets(geometry)
            np.copyto(target, phases.window(rx, ry, n, rows))
            for rx, ry in rest:
                combine(target, phases.window(rx, ry, n, rows), out=target)
            if scale is not None:
                np.divide(target, scale, out=target)

    _window_pass(ws, x.shape[0], geometry, x.shape[3], work)
    return out


def maxpool_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    # docs/standard.md §4: OUT_D goes to every in-bounds input equal to the output (all
    # tied maxima), summed over overlapping windows. Padding equal to the output gets a
    # share too, in the phases, which merge() drops.
    x, out, out_residual = inputs[0], outputs[0], out_residuals[0]
    geometry = Geometry.of(layer)
    in_residual = ws.result(x.shape, x.dtype)
    all_rows = slice(0, geometry.out_xy[0])

    def work(part: int, b0: int, b1: int, blocks: list[slice]) -> None:
        n = b1 - b0
        maps = Phases(ws, f"phases{part}", geometry, n, x)
        maps.split(x[b0:b1])
        residuals = Phases(ws, f"residual_phases{part}", geometry, n, x, scatter=True)
        residuals.zero(n)
        maximum, residual = out[b0:b1], out_residual[b0:b1]
        tie = ws.scratch(f"mask{part}", maximum.shape, np.bool_)
        share = _temporary(ws, part, residual)
        for rx, ry in _offsets(geometry):
            target = residuals.window(rx, ry, n, all_rows)
            np.equal(maps.window(rx, ry, n, all_rows), maximum, out=tie)
            if geometry.overlapping:
                np.multiply(residual, tie, out=share)
                np.add(target, share, out=target)
            else:
                np.multiply(residual, tie, out=target)
        residuals.merge(in_residual[b0:b1])

    _window_pass(ws, x.shape[0], geometry, x.shape[3], work)
    return [in_residual]


# Average pooling (section 6.2): the divisor is Rx*Ry always (docs/standard.md §4). -------


def avgpool_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    x = inputs[0]
    geometry = Geometry.of(layer)
    window = geometry.window[0] * geometry.window[1]
    if is_global(layer):
        return [np.sum(x, axis=(1, 2), keepdims=True) / window]
    return [_reduce_windows(ws, layer, x, np.add, scale=window)]


def avgpool_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    geometry = Geometry.of(layer)
    share = out_residuals[0] / (geometry.window[0] * geometry.window[1])
    batch = share.shape[0]
    in_residual = ws.result((batch, *layer.in_shapes[0]), share.dtype)
    if is_global(layer):
        in_residual[...] = share
        return [in_residual]
    all_rows = slice(0, geometry.out_xy[0])

    def work(part: int, b0: int, b1: int, blocks: list[slice]) -> None:
        n = b1 - b0
        phases = Phases(ws, f"phases{part}", geometry, n, share, scatter=True)
        phases.zero(n)
        for rx, ry in _offsets(geometry):
            target = phases.window(rx, ry, n, all_rows)
            if geometry.overlapping:
                np.add(target, share[b0:b1], out=target)
            else:
                np.copyto(target, share[b0:b1])
        phases.merge(in_residual[b0:b1])

    _window_pass(ws, batch, geometry, in_residual.shape[3], work)
    return [in_residual]


# ReLU (section 6.3), elementwise addition (6.7): flat passes in cache-sized blocks. ------


def _flat_pass(ws: Workspace, size: int, step: Callable[[int, slice], None]) -> None:
    """``step(part, block)`` over ``range(size)`` in blocks, spread over the threads."""

    def task(part: int, start: int, stop: int) -> None:
        for first in range(start, stop, BLOCK_ELEMENTS):
            step(part, slice(first, min(first + BLOCK_ELEMENTS, stop)))

    ws.parallel(task, size, size)


def relu_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    # docs/standard.md §4: IN > 0 ? IN : 0; max(IN, 0) is that for every input but NaN.
    x = inputs[0].reshape(-1)
    out = ws.result(x.shape, x.dtype)
    _flat_pass(ws, x.size, lambda part, s: np.maximum(x[s], 0, out=out[s]))
    return [out.reshape(inputs[0].shape)]


def relu_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    # docs/standard.md §4: decided on IN, not OUT.
    x, residual = inputs[0].reshape(-1), out_residuals[0].reshape(-1)
    in_residual = ws.result(x.shape, residual.dtype)

    def step(part: int, s: slice) -> None:
        positive = ws.scratch(f"mask{part}", (s.stop - s.start,), np.bool_)
        np.greater(x[s], 0, out=positive)
        np.multiply(residual[s], positive, out=in_residual[s])

    _flat_pass(ws, x.size, step)
    return [in_residual.reshape(inputs[0].shape)]


def eltwise_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    a, b = inputs[0].reshape(-1), inputs[1].reshape(-1)
    out = ws.result(a.shape, np.result_type(a, b))
    _flat_pass(ws, a.size, lambda part, s: np.add(a[s], b[s], out=out[s]))
    return [out.reshape(inputs[0].shape)]


def eltwise_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    return eltwise_in_residuals(out_residuals)


# Concat (6.4), split (6.5), shuffle (6.9): copies, split over the threads by images. -----


def _by_images(ws: Workspace, batch: int, size: int, copy: Callable[[slice], None]) -> None:
    ws.parallel(lambda part, start, stop: copy(slice(start, stop)), batch, size)


def _join(ws: Workspace, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Channels of ``first``, then those of ``second``, in a fresh map."""
    channels = first.shape[3]
    out = ws.result((*first.shape[:3], channels + second.shape[3]), first.dtype)

    def copy(b: slice) -> None:
        out[b, ..., :channels] = first[b]
        out[b, ..., channels:] = second[b]

    _by_images(ws, out.shape[0], out.size, copy)
    return out


def concat_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    return [_join(ws, inputs[0], inputs[1])]


def concat_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    return list(channel_parts(out_residuals[0], layer.in_shapes[0][2]))


def split_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    # Copies, not views of IN (reference/split.py says why).
    x = inputs[0]
    views = channel_parts(x, layer.params["L1"])
    parts = [ws.result(view.shape, x.dtype) for view in views]

    def copy(b: slice) -> None:
        parts[0][b] = views[0][b]
        parts[1][b] = views[1][b]

    _by_images(ws, x.shape[0], x.size, copy)
    return parts


def split_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    return [_join(ws, out_residuals[0], out_residuals[1])]


def _regrouped(ws: Workspace) -> Callable[[np.ndarray], np.ndarray]:
    """``shuffle``'s copy of the regrouped channels: a result, split over the threads by images."""

    def copy(grid: np.ndarray) -> np.ndarray:
        *lead, columns, rows = grid.shape
        out = ws.result((*lead, columns * rows), grid.dtype)
        out_grid = out.reshape(grid.shape)
        _by_images(ws, grid.shape[0], out.size, lambda b: np.copyto(out_grid[b], grid[b]))
        return out

    return copy


def shuffle_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    return [shuffle(layer, inputs[0], _regrouped(ws))]


def shuffle_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    return [shuffle(layer, out_residuals[0], _regrouped(ws), inverse=True)]


# Fully connected (section 6.8): one GEMM on the map reordered to (l, x, y). ---------------


def _map_lxy(ws: Workspace, x: np.ndarray) -> np.ndarray:
    """``lxy`` of IN, reordered in the workspace."""

    def copy(view: np.ndarray) -> np.ndarray:
        reordered = ws.scratch("fc", view.shape, view.dtype)
        np.copyto(reordered, view)
        return reordered

    return lxy(x, copy)


def fc_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    x, matrix = inputs[0], weights["weights"]
    matrix = matrix.reshape(matrix.shape[0], -1)
    out = ws.result((x.shape[0], 1, 1, matrix.shape[0]), x.dtype)
    out_rows = out.reshape(x.shape[0], -1)
    np.matmul(_map_lxy(ws, x), matrix.T, out=out_rows)
    np.add(out_rows, weights["biases"], out=out_rows)
    return [out]


def fc_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    residual, matrix = out_residuals[0], weights["weights"]
    batch = residual.shape[0]
    rows = residual.reshape(batch, -1) @ matrix.reshape(matrix.shape[0], -1)
    in_residual = ws.result((batch, *layer.in_shapes[0]), rows.dtype)
    np.copyto(in_residual, from_lxy(rows, layer))
    return [in_residual]


def fc_gradient(ws: Workspace, layer: Layer, inputs: list, out_residuals: list) -> dict:
    residual = out_residuals[0].reshape(out_residuals[0].shape[0], -1)
    weights_grad = residual.T @ _map_lxy(ws, inputs[0])
    return {
        "weights": weights_grad.reshape(layer.weight_shapes["weights"]),
        "biases": residual.sum(axis=0),
    }
