"""Compiled loops (Numba) for the steps that NumPy would run as many whole-map passes:
depthwise convolution (section 6.6), max pooling's backward step (6.2), ReLU (6.3),
shuffle (6.9) and a 1x1 convolution's BIASES (6.1). Each position is visited once, its
channels the innermost, vectorised loop (docs/performance.md, "Why the NumPy kernels are
shaped so").

Every function works on a range of units (rows of a map, flat elements or matrix rows, as
its docstring says) so that the workspace's pool splits it over the threads
(``Workspace.parallel``); each writes only its own units, and runs without the GIL. The
dtypes the backend runs (float32; the integer inference's int8 and int16 maps and float64
sums) are compiled when this module is imported (from Numba's cache after the first time),
so never inside a timed step; arrays must be C-contiguous (``contiguous``). Every loop adds
in a fixed order, so a result does not depend on the threads' timing.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_FLOATS = (nb.float32, nb.float64)
_MAP_TYPES = (nb.float32, nb.int8, nb.int16)  # ReLU and shuffle run on the integer maps too


def _map(t):
    return t[:, :, :, ::1]


def contiguous(array: np.ndarray) -> np.ndarray:
    """``array`` in C order: itself when it already is, else a copy (a view such as
    concat's residual parts is copied at each call)."""
    return np.ascontiguousarray(array)


def _signatures(types, arguments) -> list:
    return [nb.void(*arguments(t)) for t in types]


_i = nb.int64


def _compile(signatures: list):
    """A Numba function compiled at import for ``signatures`` (the dtypes the backend runs);
    any other dtype (a subclass's float64, say) compiles at its first call."""

    def decorate(function):
        dispatcher = nb.njit(nogil=True, cache=True, error_model="numpy")(function)
        for signature in signatures:
            dispatcher.compile(signature)
        return dispatcher

    return decorate


@nb.njit(nogil=True, cache=True)
def _offsets_inside(first: int, window: int, size: int) -> tuple[int, int]:
    """The window offsets r (a range) at which a window from position ``first`` lies in a
    map of ``size`` positions (the rest is padding)."""
    return max(0, -first), min(window, size - first)


@_compile(_signatures(_FLOATS, lambda t: (_map(t), t[:, :, ::1], t[::1], _map(t)) + (_i,) * 5))
def depthwise_rows(x, filters, biases, out, stride, pad_x, pad_y, start, stop):
    """``out`` rows ``start .. stop-1`` (unit = image * Xout + row) = BIASES + the sum over
    the window of IN * FILTERS, the window's offsets in (rx, ry) order."""
    size_x, size_y, channels = x.shape[1], x.shape[2], x.shape[3]
    window_x, window_y = filters.shape[0], filters.shape[1]
    out_x, out_y = out.shape[1], out.shape[2]
    for unit in range(start, stop):
        image, ox = unit // out_x, unit % out_x
        first_x = ox * stride - pad_x
        rx0, rx1 = _offsets_inside(first_x, window_x, size_x)
        for oy in range(out_y):
            first_y = oy * stride - pad_y
            ry0, ry1 = _offsets_inside(first_y, window_y, size_y)
            target = out[image, ox, oy]
            for c in range(channels):
                target[c] = biases[c]
            for rx in range(rx0, rx1):
                for ry in range(ry0, ry1):
                    source = x[image, first_x + rx, first_y + ry]
                    weight = filters[rx, ry]
                    for c in range(channels):
                        target[c] += source[c] * weight[c]


@nb.njit(nogil=True, cache=True)
def _outputs_holding(padded: int, window: int, stride: int, outputs: int) -> tuple[int, int]:
    """The outputs o (a range) whose window, from o * stride, holds the padded position."""
    first = max(0, -((window - 1 - padded) // stride))  # ceil((padded - window + 1) / s)
    return first, min(outputs, padded // stride + 1)


@_compile(_signatures(_FLOATS[:1], lambda t: (_map(t), t[:, :, ::1], _map(t)) + (_i,) * 5))
def depthwise_in_residual_rows(residual, filters, in_residual, stride, pad_x, pad_y, start, stop):
    """IN_D rows ``start .. stop-1`` (unit = image * X + row): the sum of OUT_D * FILTERS
    over the outputs whose window holds each input, gathered (no two units write one row)."""
    size_x, size_y, channels = in_residual.shape[1], in_residual.shape[2], in_residual.shape[3]
    window_x, window_y = filters.shape[0], filters.shape[1]
    out_x, out_y = residual.shape[1], residual.shape[2]
    for unit in range(start, stop):
        image, ix = unit // size_x, unit % size_x
        ox0, ox1 = _outputs_holding(ix + pad_x, window_x, stride, out_x)
        for iy in range(size_y):
            oy0, oy1 = _outputs_holding(iy + pad_y, window_y, stride, out_y)
            target = in_residual[image, ix, iy]
            for c in range(channels):
                target[c] = 0
            for ox in range(ox0, ox1):
                for oy in range(oy0, oy1):
                    source = residual[image, ox, oy]
                    weight = filters[ix + pad_x - ox * stride, iy + pad_y - oy * stride]
                    for c in range(channels):
                        target[c] += source[c] * weight[c]


@_compile(
    _signatures(
        _FLOATS[:1], lambda t: (_map(t), _map(t), nb.float64[:, :, ::1], t[:, :, ::1]) + (_i,) * 5
    )
)
def depthwise_gradient_rows(x, residual, sums, row_sums, stride, pad_x, pad_y, start, stop):
    """``sums`` [Rx][Ry][L] (float64) += the sum over output rows ``start .. stop-1`` of
    IN * OUT_D at each window offset; each row's sum is taken in ``row_sums`` first."""
    size_x, size_y, channels = x.shape[1], x.shape[2], x.shape[3]
    window_x, window_y = sums.shape[0], sums.shape[1]
    out_x, out_y = residual.shape[1], residual.shape[2]
    for unit in range(start, stop):
        image, ox = unit // out_x, unit % out_x
        first_x = ox * stride - pad_x
        rx0, rx1 = _offsets_inside(first_x, window_x, size_x)
        row_sums[:] = 0
        for oy in range(out_y):
            first_y = oy * stride - pad_y
            ry0, ry1 = _offsets_inside(first_y, window_y, size_y)
            weight = residual[image, ox, oy]
            for rx in range(rx0, rx1):
                for ry in range(ry0, ry1):
                    source = x[image, first_x + rx, first_y + ry]
                    target = row_sums[rx, ry]
                    for c in range(channels):
                        target[c] += source[c] * weight[c]
        for rx in range(window_x):
            for ry in range(window_y):
                for c in range(channels):
                    sums[rx, ry, c] += row_sums[rx, ry, c]


@_compile(_signatures(_FLOATS[:1], lambda t: (_map(t), _map(t), _map(t), _map(t)) + (_i,) * 7))
def maxpool_in_residual_rows(
    x, out, residual, in_residual, window_x, window_y, stride, pad_x, pad_y, start, stop
):
    """IN_D rows ``start .. stop-1`` (unit = image * X + row): the sum of OUT_D over the
    windows holding each input where it equals the window's output (every tied maximum
    gets the whole OUT_D, docs/standard.md §4), gathered."""
    size_x, size_y, channels = x.shape[1], x.shape[2], x.shape[3]
    out_x, out_y = out.shape[1], out.shape[2]
    for unit in range(start, stop):
        image, ix = unit // size_x, unit % size_x
        ox0, ox1 = _outputs_holding(ix + pad_x, window_x, stride, out_x)
        for iy in range(size_y):
            oy0, oy1 = _outputs_holding(iy + pad_y, window_y, stride, out_y)
            target = in_residual[image, ix, iy]
            value = x[image, ix, iy]
            for c in range(channels):
                target[c] = 0
            for ox in range(ox0, ox1):
                for oy in range(oy0, oy1):
                    maximum, share = out[image, ox, oy], residual[image, ox, oy]
                    for c in range(channels):
                        if value[c] == maximum[c]:
                            target[c] += share[c]


@_compile(_signatures(_MAP_TYPES, lambda t: (t[::1], t[::1], _i, _i)))
def relu_span(x, out, start, stop):
    """``out[start:stop]`` = IN > 0 ? IN : 0 (docs/standard.md §4), of flat maps."""
    # Sliced first, and 0 in the arrays' type: indexed from ``start``, with a literal 0 (an
    # int64), the loop does not vectorise.
    source, target = x[start:stop], out[start:stop]
    zero = np.zeros(1, dtype=out.dtype)[0]
    for k in range(source.size):
        target[k] = source[k] if source[k] > zero else zero


@_compile(_signatures(_FLOATS[:1], lambda t: (t[::1], t[::1], t[::1], _i, _i)))
def relu_in_residual_span(x, residual, in_residual, start, stop):
    """``in_residual[start:stop]`` = IN > 0 ? OUT_D : 0 (decided on IN), of flat maps."""
    source, share, target = x[start:stop], residual[start:stop], in_residual[start:stop]
    zero = np.zeros(1, dtype=in_residual.dtype)[0]
    for k in range(source.size):
        target[k] = share[k] if source[k] > zero else zero


@_compile(_signatures(_MAP_TYPES, lambda t: (t[:, ::1], t[:, ::1], _i, _i, _i)))
def regroup_rows(source, out, rows, start, stop):
    """``out`` positions ``start .. stop-1`` = the channels of ``source`` [P][L] viewed as
    [rows][L/rows], transposed (``backends.common.shuffle``: rows = G, or L/G for IN_D)."""
    columns = source.shape[1] // rows
    for position in range(start, stop):
        channels, target = source[position], out[position]
        for g in range(rows):
            part = channels[g * columns : (g + 1) * columns]
            for j in range(columns):
                target[j * rows + g] = part[j]


@_compile(_signatures(_FLOATS, lambda t: (t[:, ::1], t[::1], _i, _i)))
def add_to_rows(rows, vector, start, stop):
    """``rows[start:stop]`` [N][F] += ``vector`` [F], in place (a 1x1 convolution's
    BIASES; NumPy's broadcast add loops over one row of F values at a time)."""
    for row in range(start, stop):
        target = rows[row]
        for f in range(target.size):
            target[f] += vector[f]
