"""Convolution (section 6.1): im2col + GEMM (block by block while a block is in the cache,
or chunk by chunk where the weights are large; a 1x1 window's im2col is the map itself, or
at a stride the map subsampled), the backward pass by the adjoint im2col or by col2im's
scatter, whichever moves less memory."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np
from numpy.lib.stride_tricks import as_strided

from pytest_gostcnn.model.layers import Layer

from ...common import is_pointwise
from ..workspace import Workspace
from . import compiled
from ._shared import Geometry, _column_sums, _rows


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


def _pad_rows(
    padded: np.ndarray, images: np.ndarray, pad: tuple[int, int], r0: int, r1: int
) -> None:
    """Rows ``r0 .. r1-1`` of ``padded`` = those of ``images`` with a zero border of ``pad``
    (negative pad: cropped)."""
    px, py = pad
    x, y = images.shape[1:3]
    lo, hi = max(r0 - px, 0), min(r1 - px, x)  # the source rows that land in [r0, r1)
    if hi <= lo:
        padded[:, r0:r1] = 0
        return
    padded[:, r0 : lo + px] = 0
    padded[:, hi + px : r1] = 0
    rows = padded[:, lo + px : hi + px]
    crop, border = max(-py, 0), max(py, 0)
    if border:
        rows[:, :, :border] = 0
        rows[:, :, -border:] = 0
    rows[:, :, border : rows.shape[2] - border] = images[:, lo:hi, crop : y - crop]


def _image_rows(start: int, stop: int, rows: int) -> Iterator[tuple[int, int, int]]:
    """``(image, r0, r1)``: the rows ``start .. stop-1`` of images of ``rows`` rows each,
    numbered image after image, cut at the images' edges."""
    while start < stop:
        image, r0 = divmod(start, rows)
        r1 = min(rows, r0 + stop - start)
        yield image, r0, r1
        start += r1 - r0


def _im2col_chunks(
    ws: Workspace, source: np.ndarray, geometry: Geometry, with_ones: bool
) -> Iterator[tuple[int, int, slice, np.ndarray]]:
    """Yield ``(c0, n, rows, cols)``: im2col of output rows ``rows`` of images
    ``c0 .. c0+n-1`` of ``source``.

    ``cols`` is [n*len(rows)*Yout][Rx*Ry*L (+1)], its columns in (rx, ry, l) order,
    FILTERS' own, plus a last column of ones when ``with_ones``. It lives in the workspace:
    use it before the next chunk. Chunks are as many whole images as fit the workspace, or
    where one image alone does not, as many of its output rows as fit: a cols larger than
    the caches slows the GEMM that reads it (docs/performance.md). The copies are split over
    the threads by output rows, so a chunk of one image uses every thread too.
    """
    batch, _, _, channels = source.shape
    (x_out, y_out), (rx, ry) = geometry.out_xy, geometry.window
    depth = rx * ry * channels
    width = depth + with_ones
    padding = geometry.pad != (0, 0)
    padded_xy = (source.shape[1] + 2 * geometry.pad[0], source.shape[2] + 2 * geometry.pad[1])
    row_bytes = y_out * width * source.itemsize
    padded_bytes = padded_xy[0] * padded_xy[1] * channels * source.itemsize if padding else 0
    image_bytes = x_out * row_bytes + padded_bytes
    chunk = ws.images_per_chunk(image_bytes, batch)
    if image_bytes > ws.workspace_bytes:
        rows_per_chunk = max(1, ws.workspace_bytes // row_bytes)
        chunks = [
            (b, 1, slice(r, min(r + rows_per_chunk, x_out)))
            for b in range(batch)
            for r in range(0, x_out, rows_per_chunk)
        ]
    else:
        chunks = [(c0, min(chunk, batch - c0), slice(0, x_out)) for c0 in range(0, batch, chunk)]
    for c0, n, rows in chunks:
        out_rows = rows.stop - rows.start
        cols = ws.scratch("cols", (n * out_rows * y_out, width), source.dtype)
        images = source[c0 : c0 + n]
        # As many images as threads: each thread pads and copies whole images, the padded
        # image still in its cache. Fewer, or rows of one image (even on one thread): the
        # threads share the rows, the padding done first, once per image.
        by_images = n >= ws.threads and rows == slice(0, x_out)
        unpadded = None
        if padding:
            padded = ws.scratch("padded", (n, *padded_xy, channels), source.dtype)
            if by_images:
                unpadded = images
            elif rows.start == 0:

                def pad(part: int, start: int, stop: int, images=images, padded=padded):
                    for i, r0, r1 in _image_rows(start, stop, padded_xy[0]):
                        _pad_rows(padded[i : i + 1], images[i : i + 1], geometry.pad, r0, r1)

                ws.parallel(pad, n * padded_xy[0], padded.size)
            images = padded
        row, column = cols.strides
        cols6 = as_strided(
            cols,
            shape=(n, out_rows, y_out, rx, ry, channels),
            strides=(
                out_rows * y_out * row,
                y_out * row,
                row,
                ry * channels * column,
                channels * column,
                column,
            ),
        )
        ones_column = depth if with_ones else None
        fill = _fill_task(cols, cols6, images, geometry, rows, ones_column, unpadded)
        if by_images:
            ws.parallel(
                lambda part, b0, b1, fill=fill: fill(part, b0 * x_out, b1 * x_out),
                n,
                cols.size,
            )
        else:
            ws.parallel(fill, n * out_rows, cols.size)
        yield c0, n, rows, cols


def _fill_task(
    cols: np.ndarray,
    cols6: np.ndarray,
    images: np.ndarray,
    geometry: Geometry,
    rows: slice,
    ones_column: int | None,
    unpadded: np.ndarray | None,
) -> Callable[[int, int, int], None]:
    """The pool task that fills ``cols6`` (``cols`` as [n][rows][Yout][Rx][Ry][L]) from the
    (padded) ``images``, and ``cols``' column of ones; its units are output rows. With
    ``unpadded``, its units are whole images, each padded from ``unpadded`` first."""
    out_rows, y_out = cols6.shape[1:3]

    def fill(part: int, start: int, stop: int) -> None:
        for i, r0, r1 in _image_rows(start, stop, out_rows):
            if unpadded is not None:
                _pad_rows(images[i : i + 1], unpadded[i : i + 1], geometry.pad, 0, images.shape[1])
            windows = _windows_view(images[i : i + 1], geometry)
            np.copyto(cols6[i : i + 1, r0:r1], windows[:, rows.start + r0 : rows.start + r1])
        if ones_column is not None:
            cols[start * y_out : stop * y_out, ones_column] = 1

    return fill


def _im2col_gemm(
    ws: Workspace,
    source: np.ndarray,
    geometry: Geometry,
    matrix: np.ndarray,
    out: np.ndarray,
    with_ones: bool,
) -> None:
    """``out`` [B][Xout][Yout][F] = im2col(``source``) @ ``matrix``: each block's product
    written as it is copied, or (weights above ``blocked_weights_bytes``) chunk by chunk."""
    if matrix.nbytes > ws.blocked_weights_bytes:
        for c0, n, rows, cols in _im2col_chunks(ws, source, geometry, with_ones):
            ws.matmul(cols, matrix, _rows(out[c0 : c0 + n, rows]))
        return

    def multiply(part: int, cols: np.ndarray, image: int, r0: int, r1: int) -> None:
        np.matmul(cols, matrix, out=_rows(out[image, r0:r1]))

    _im2col_blocks(ws, source, geometry, with_ones, out.size * matrix.shape[0], multiply)


Consume = Callable[[int, np.ndarray, int, int, int], None]

# A thread pads a whole image into its own scratch up to this size (the analogs' maps,
# the canonical ones to 56x56x256); a larger padded image (the canonical VGG-16's
# 224x224x64: 13 MB, one per thread) is padded once and its rows shared by the threads.
PADDED_IMAGE_BYTES = 4 * 2**20


def _im2col_blocks(
    ws: Workspace,
    source: np.ndarray,
    geometry: Geometry,
    with_ones: bool,
    macs: int,
    consume: Consume,
) -> None:
    """Call ``consume(part, cols, image, r0, r1)`` with the im2col of output rows
    ``r0 .. r1-1`` of ``image``, block by block, on the thread numbered ``part``.

    ``cols`` is each thread's own scratch in ``_im2col_chunks``' layout: as many output rows
    as fit ``block_bytes`` (at least one), its product taken while it is in the cache.
    Where the images split evenly over the threads (``_by_images``) and a padded image is
    small (PADDED_IMAGE_BYTES), each thread takes whole images, padding each into its own
    scratch first; otherwise image by image, padded once, the threads sharing its output
    rows. ``macs`` sizes the whole pass (below ``parallel_min_macs`` it runs on the calling
    thread).
    """
    batch, _, _, channels = source.shape
    (x_out, y_out), (rx, ry) = geometry.out_xy, geometry.window
    depth = rx * ry * channels
    width = depth + with_ones
    row_bytes = y_out * width * source.itemsize
    rows_per_block = max(1, ws.block_bytes // row_bytes)
    padding = geometry.pad != (0, 0)
    padded_shape = (
        1,
        source.shape[1] + 2 * geometry.pad[0],
        source.shape[2] + 2 * geometry.pad[1],
        channels,
    )

    def blocks(part: int, image: np.ndarray, i: int, r0: int, r1: int) -> None:
        windows = _windows_view(image, geometry)[0]
        block_rows = min(rows_per_block, r1 - r0)  # no taller than the rows to copy
        cols = ws.scratch(f"cols{part}", (block_rows * y_out, width), source.dtype)
        if with_ones:
            cols[:, depth] = 1
        for a in range(r0, r1, block_rows):
            b = min(r1, a + block_rows)
            block = cols[: (b - a) * y_out]
            np.copyto(block[:, :depth].reshape(b - a, y_out, rx, ry, channels), windows[a:b])
            consume(part, block, i, a, b)

    padded_bytes = math.prod(padded_shape) * source.itemsize if padding else 0
    if _by_images(batch, ws.threads) and padded_bytes <= PADDED_IMAGE_BYTES:

        def by_images(part: int, start: int, stop: int) -> None:
            for i in range(start, stop):
                image = source[i : i + 1]
                if padding:
                    padded = ws.scratch(f"padded{part}", padded_shape, source.dtype)
                    _pad_rows(padded, image, geometry.pad, 0, padded_shape[1])
                    image = padded
                blocks(part, image, i, 0, x_out)

        ws.parallel(by_images, batch, macs, ws.parallel_min_macs)
        return
    for i in range(batch):
        image = source[i : i + 1]
        if padding:
            padded = ws.scratch("padded", padded_shape, source.dtype)

            def pad(part: int, start: int, stop: int, image=image, padded=padded) -> None:
                _pad_rows(padded, image, geometry.pad, start, stop)

            ws.parallel(pad, padded_shape[1], padded.size)
            image = padded

        def by_rows(part: int, start: int, stop: int, image=image, i=i) -> None:
            blocks(part, image, i, start, stop)

        ws.parallel(by_rows, x_out, macs // batch, ws.parallel_min_macs)


def _by_images(batch: int, threads: int) -> bool:
    """Whether whole images split evenly enough over the threads: a multiple of them, or
    at least four images a thread (3 images on 2 threads would keep one idle a third of
    the pass)."""
    return batch >= threads and (batch % threads == 0 or batch >= 4 * threads)


def _reads_the_map(layer: Layer) -> bool:
    """An unpadded 1x1 window, of any stride: its im2col is the map itself (``is_pointwise``)
    or, at a stride S > 1 (Р's projections), the map subsampled, and nothing more."""
    p = layer.params
    return (p["Rx"], p["Ry"], p["Px"], p["Py"]) == (1, 1, 0, 0)


def _subsampled(ws: Workspace, x: np.ndarray, layer: Layer) -> np.ndarray:
    """The map an unpadded 1x1 window reads: ``x`` itself at stride 1, else every S-th row
    and column of it copied into the workspace (a quarter of the map at S = 2), for one
    GEMM over all of its rows (docs/performance.md, "Strided 1x1 layers")."""
    s = layer.params["S"]
    if s == 1:
        return x
    x_out, y_out = layer.out_shapes[0][:2]
    view = x[:, : s * x_out : s, : s * y_out : s]
    sub = ws.scratch("subsampled", view.shape, x.dtype)

    def copy(part: int, start: int, stop: int) -> None:
        np.copyto(sub[start:stop], view[start:stop])

    ws.parallel(copy, x.shape[0], sub.size)
    return sub


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
    if _reads_the_map(layer):
        out_rows = _rows(out)
        ws.matmul(_rows(_subsampled(ws, x, layer)), matrix, out_rows)
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
        ws.matmul(_rows(out_residual), matrix.T, _rows(in_residual))
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


# col2im lays its columns out channels first below this many channels (and where a row of
# the map is longer than the channels). IN_D of the canonical VGG-16's 112x112 64->128
# layer at B=4: channels first 79.8 ms, channels last 50.2 ms; at 16 and 3 channels
# channels first is the faster (28.5 against 34.2 ms, 22.4 against 67.9 ms); 32 is even.
CHANNELS_FIRST_BELOW = 32


def _col2im_backward(
    ws: Workspace, layer: Layer, geometry: Geometry, out_residual: np.ndarray, filters: np.ndarray
) -> np.ndarray:
    """IN_D of a strided or widening convolution: OUT_D times FILTERS, columns scattered back.

    Each window offset adds one slice of the GEMM's result into IN_D. NumPy's speed there is
    the length of the runs it adds: with few channels (the network's first layer, L = 3)
    the result is laid out channels first, so runs are rows of the map, not L channels
    (but IN_D is then written one channel at a time, L strided passes: from
    CHANNELS_FIRST_BELOW channels the runs of L are the cheaper); and the padded IN_D is
    held as S*S phase maps (padded position S*q + a in phase a, index q), where every
    offset's slice is a unit-stride block, not a stride-S lattice.
    """
    batch = out_residual.shape[0]
    rx, ry, channels, features = filters.shape
    channels_first = geometry.out_xy[1] > channels and channels < CHANNELS_FIRST_BELOW
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
            ws.matmul(matrix, residual_rows.T, cols)
            cols6 = cols.reshape(rx, ry, channels, n, *geometry.out_xy)
            padded = ws.scratch("padded", (s, s, channels, n, *phase_xy), out_residual.dtype)
        else:
            cols = ws.scratch("cols", (n * positions, depth), out_residual.dtype)
            ws.matmul(residual_rows, matrix.T, cols)
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
    if _reads_the_map(layer):
        residual_rows = _rows(out_residual)
        filters_grad = _transposed_product(ws, _rows(_subsampled(ws, x, layer)), residual_rows)
        filters_grad = filters_grad.reshape(rx, ry, channels, features)
        return {"filters": filters_grad, "biases": _column_sums(ws, residual_rows)}
    depth = rx * ry * channels
    geometry = Geometry.of(layer)
    # [im2col(IN) | 1]^T @ OUT_D holds FILTERS_D over BIASES_D; summed block by block (each
    # thread its own sum, added in the threads' order) or chunk by chunk.
    if (depth + 1) * features * x.itemsize <= ws.blocked_weights_bytes:
        total = _blocked_gradient(ws, x, geometry, out_residual, depth + 1)
        return {
            "filters": total[:depth].reshape(rx, ry, channels, features),
            "biases": total[depth].copy(),
        }
    total = np.zeros((depth + 1, features), dtype=x.dtype)
    partial = np.empty_like(total)
    for c0, n, rows, cols in _im2col_chunks(ws, x, geometry, with_ones=True):
        _transposed_product(ws, cols, _rows(out_residual[c0 : c0 + n, rows]), out=partial)
        np.add(total, partial, out=total)
    return {
        "filters": total[:depth].reshape(rx, ry, channels, features),
        "biases": total[depth].copy(),
    }


def _blocked_gradient(
    ws: Workspace, x: np.ndarray, geometry: Geometry, out_residual: np.ndarray, width: int
) -> np.ndarray:
    """[im2col(``x``) | 1]^T @ ``out_residual``'s rows, ``width`` rows, a block at a time."""
    features = out_residual.shape[-1]
    sums = [np.zeros((width, features), dtype=x.dtype) for _ in range(ws.threads)]

    def accumulate(part: int, cols: np.ndarray, image: int, r0: int, r1: int) -> None:
        product = ws.scratch(f"product{part}", sums[part].shape, x.dtype)
        _oriented_product(None, cols, _rows(out_residual[image, r0:r1]), product)
        np.add(sums[part], product, out=sums[part])

    _im2col_blocks(ws, x, geometry, True, out_residual.size * width, accumulate)
    for partial in sums[1:]:
        np.add(sums[0], partial, out=sums[0])
    return sums[0]


# A 1x1 layer's weight gradient product up to this many elements (32 channels into 512
# features) is split over the threads along its reduction, into per-thread partial products
# summed at the end: split along its own short sides, each thread would stream all of the
# tall operands for a sliver of the product. (A wider window's gradient of such a size goes
# block by block, one sum per thread: _blocked_gradient.)
SPLIT_REDUCTION_ELEMENTS = 1 << 14


def _transposed_product(
    ws: Workspace, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    """``a.T @ b`` for the tall [N][K] and [N][F] of a weight gradient.

    OpenBLAS runs this reduction over N up to 4x slower when the product has fewer rows
    than columns (K < F: a widening 1x1 convolution), so such a product is computed as
    ``(b.T @ a).T`` (docs/performance.md, the canonical set). A small product is split
    over the threads along N (SPLIT_REDUCTION_ELEMENTS), the partial products summed in the
    threads' order, so the result does not depend on which thread ran first.
    """
    if out is None:
        out = np.empty((a.shape[1], b.shape[1]), dtype=np.result_type(a, b))
    macs = a.shape[0] * a.shape[1] * b.shape[1]
    parts = min(ws.threads, a.shape[0])
    if out.size > SPLIT_REDUCTION_ELEMENTS or parts < 2 or macs < ws.parallel_min_macs:
        _oriented_product(ws, a, b, out)
        return out
    partials = [out] + [ws.scratch(f"partial{p}", out.shape, out.dtype) for p in range(1, parts)]
    bounds = [a.shape[0] * p // parts for p in range(parts + 1)]

    def task(part: int, start: int, stop: int) -> None:
        for p in range(start, stop):
            rows = slice(bounds[p], bounds[p + 1])
            _oriented_product(None, a[rows], b[rows], partials[p])

    ws.parallel(task, parts, macs, 0)
    for partial in partials[1:]:
        np.add(out, partial, out=out)
    return out


def _oriented_product(ws: Workspace | None, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``out`` = ``a.T @ b`` in the orientation OpenBLAS runs faster; split over the
    threads of ``ws`` (None: on the calling thread)."""

    def multiply(x: np.ndarray, y: np.ndarray, into: np.ndarray) -> None:
        if ws is None:
            np.matmul(x, y, out=into)
        else:
            ws.matmul(x, y, into)

    if a.shape[1] >= b.shape[1]:
        multiply(a.T, b, out)
    else:  # out.T is a view: (b.T @ a) written into it is out = a.T @ b
        multiply(b.T, a, out.T)


def _add_bias(ws: Workspace, rows: np.ndarray, biases: np.ndarray) -> None:
    """``rows`` [N][F] (C-ordered) += BIASES, in place, split over the threads."""
    biases = compiled.contiguous(biases)

    def task(part: int, start: int, stop: int) -> None:
        compiled.add_to_rows(rows, biases, start, stop)

    ws.parallel(task, rows.shape[0], rows.size)
