"""Convolution's IN_D by col2im (section 6.1), for strided and widening layers: OUT_D
times FILTERS, each window offset's columns scattered back into IN_D."""

from __future__ import annotations

import numpy as np

from pytest_gostcnn.model.layers import Layer

from ..workspace import Workspace
from ._shared import Geometry, _rows

# col2im lays its columns out channels first below this many channels (and where a row of
# the map is longer than the channels): there the map's rows are the cheaper runs to add
# (docs/performance.md, "Why the NumPy kernels are shaped so").
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
