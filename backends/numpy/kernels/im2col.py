"""Convolution's im2col (section 6.1): the windows of a (padded) map copied out as rows in
FILTERS' (rx, ry, l) order, chunk by chunk or block by block over the threads, and the
products taken over them: the forward GEMM and the blocked weight gradient."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..workspace import Workspace
from ._shared import Geometry, _rows
from .transposed_product import _oriented_product


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
