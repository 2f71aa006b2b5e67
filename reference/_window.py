"""Window arithmetic shared by convolution, depthwise convolution and pooling.

Appendix A visits, for output (x, y) and window offset (rx, ry), the input position
``(x*S + rx - Px, y*S + ry - Py)`` and skips it when it falls outside the map. Padding the
map with ``Px``/``Py`` zeros on each side turns that into one strided slice per offset:
the skipped positions read the zero padding, which adds nothing to a sum. The Python loop
runs over the Rx*Ry window offsets only, never over pixels or the batch.
"""

import math
from collections.abc import Iterator

from array_api_compat import array_namespace, device, is_numpy_namespace

from pytest_gostcnn.machine import pool
from pytest_gostcnn.model.layers import Layer

from .library import Array


def zeros(like: Array, shape: tuple[int, ...]) -> Array:
    """Zeros of ``like``'s library, dtype and device."""
    return array_namespace(like).zeros(shape, dtype=like.dtype, device=device(like))


def pad(a: Array, layer: Layer) -> Array:
    """``a`` ([B][X][Y][L]) with Px / Py zero rows and columns on each side."""
    px, py = layer.params["Px"], layer.params["Py"]
    b, x, y, channels = a.shape
    padded = zeros(a, (b, x + 2 * px, y + 2 * py, channels))
    padded[:, px : px + x, py : py + y, :] = a
    return padded


def padded_zeros(layer: Layer, like: Array) -> Array:
    """Zeros shaped like ``pad`` of the layer's input map, at ``like``'s batch and type:
    where backward sums IN_D.

    Every window offset adds into its slice; ``crop`` then drops what landed on padding.
    """
    x, y, channels = layer.in_shapes[0]
    px, py = layer.params["Px"], layer.params["Py"]
    return zeros(like, (like.shape[0], x + 2 * px, y + 2 * py, channels))


def crop(padded: Array, layer: Layer) -> Array:
    """The in-bounds part of a padded map: the inverse of ``pad``."""
    px, py = layer.params["Px"], layer.params["Py"]
    x, y, _ = layer.in_shapes[0]
    return padded[:, px : px + x, py : py + y, :]


def rows(a: Array) -> Array:
    """A map [B][X][Y][L] as the matrix [B*X*Y][L] (a copy where ``a`` is a window view).

    One GEMM over all B*X*Y rows: NumPy's ``@`` on the 4-D map runs B*X small ones, many
    times slower.
    """
    return array_namespace(a).reshape(a, (-1, a.shape[-1]))


def matmul(a: Array, matrix: Array) -> Array:
    """``a`` [B][X][Y][L] times ``matrix`` [L][F]: the map [B][X][Y][F]. On NumPy, one GEMM
    per slab of the map's rows on each core of ``machine.pool`` (every output the same sum
    as one GEMM's); another library runs one GEMM on its own threads."""
    xp = array_namespace(a, matrix)
    shape = (*a.shape[:-1], matrix.shape[-1])
    axis = 1 if a.shape[1] >= pool.threads() else 0  # cut X, or the batch if X is short
    pieces = pool.parts(a.shape[axis], math.prod(shape) * matrix.shape[0])
    if not is_numpy_namespace(xp) or len(pieces) == 1:
        return xp.reshape(rows(a) @ matrix, shape)
    out = xp.empty(shape, dtype=xp.result_type(a, matrix))

    def part(span: slice) -> None:
        index = (slice(None), span) if axis == 1 else (span,)
        out[index] = xp.reshape(rows(a[index]) @ matrix, out[index].shape)

    pool.split(pieces, part)
    return out


def transposed_matmul(a: Array, b: Array) -> Array:
    """``a.T @ b`` of two maps as matrices [B*X*Y][F] and [B*X*Y][L]: the [F][L] sums over
    every position; on NumPy a slab of ``b``'s channels on each core (each sum as one
    GEMM's)."""
    xp = array_namespace(a, b)
    left = rows(a)
    pieces = pool.parts(b.shape[-1], a.shape[-1] * b.shape[-1] * left.shape[0])
    if not is_numpy_namespace(xp) or len(pieces) == 1:
        return left.T @ rows(b)
    out = xp.empty((a.shape[-1], b.shape[-1]), dtype=xp.result_type(a, b))

    def part(span: slice) -> None:
        out[:, span] = left.T @ rows(b[..., span])

    pool.split(pieces, part)
    return out


def offsets(layer: Layer) -> Iterator[tuple[int, int, tuple[slice, ...]]]:
    """Yield ``(rx, ry, index)``; ``padded[index]`` is [B][Xout][Yout][L] at that offset."""
    p = layer.params
    s = p["S"]
    x_out, y_out, _ = layer.out_shapes[0]
    for rx in range(p["Rx"]):
        for ry in range(p["Ry"]):
            index = (
                slice(None),
                slice(rx, rx + s * (x_out - 1) + 1, s),
                slice(ry, ry + s * (y_out - 1) + 1, s),
            )
            yield rx, ry, index
