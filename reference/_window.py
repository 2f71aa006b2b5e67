"""Window arithmetic shared by convolution, depthwise convolution and pooling.

Appendix A visits, for output (x, y) and window offset (rx, ry), the input position
``(x*S + rx - Px, y*S + ry - Py)`` and skips it when it falls outside the map. Padding the
map with ``Px``/``Py`` zeros on each side turns that into one strided slice per offset:
the skipped positions read the zero padding, which adds nothing to a sum. The Python loops
run over the Rx*Ry window offsets, slabs of a map's rows and parts of the batch, never over
pixels.
"""

import math
from collections.abc import Callable, Iterator

from array_api_compat import array_namespace, device, is_numpy_namespace

from pytest_gostcnn.machine import pool
from pytest_gostcnn.model.layers import Layer

from .library import Array

# The most elements a product's side-by-side copy of its windows holds at a time (32 MiB of
# float64): a convolution's products read a row of window offsets at once, and a large
# layer's whole map of them would be the row's length times the map.
SLAB_ELEMENTS = 1 << 22


def zeros(like: Array, shape: tuple[int, ...]) -> Array:
    """Zeros of ``like``'s library, dtype and device."""
    return array_namespace(like).zeros(shape, dtype=like.dtype, device=device(like))


def numpy_parts(like: Array, length: int, work: int) -> list[slice]:
    """``range(length)`` cut into one part a thread of the pool for ``work`` operations in
    all (``pool.parts``) where ``like`` is NumPy's; the whole on another library, which runs
    its own threads."""
    if not is_numpy_namespace(array_namespace(like)):
        return [slice(0, length)]
    return pool.parts(length, work)


def batch_parts(like: Array, work: int) -> list[slice]:
    """The batch of ``like`` cut as ``numpy_parts`` cuts it."""
    return numpy_parts(like, like.shape[0], work)


def pad(a: Array, layer: Layer) -> Array:
    """``a`` ([B][X][Y][L]) with Px / Py zero rows and columns on each side: ``a`` itself
    where both are 0 (the callers only read it)."""
    px, py = layer.params["Px"], layer.params["Py"]
    if px == py == 0:
        return a
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

    One GEMM over all of a slab's rows: NumPy's ``@`` on the 4-D map runs B*X small ones,
    many times slower.
    """
    return array_namespace(a).reshape(a, (-1, a.shape[-1]))


def products(maps: list[Array], matrix: Array, take: Callable[[tuple, Array], None]) -> None:
    """The maps [B][X][Y][·] side by side along their channels, times ``matrix``: for each
    slab of the maps' rows, ``take(index, product)``, ``product`` the [B'][X'][Y][F] part at
    ``index`` (a slice of X, or of the batch where X is shorter than the pool). On NumPy the
    slabs run on ``machine.pool``'s threads (``take`` writes its own slab only); a slab's
    side-by-side copy holds at most ``SLAB_ELEMENTS`` (one row at least), so the copy stays
    small in any layer. Every output is the same sum as one product's."""
    xp, first = array_namespace(maps[0], matrix), maps[0]
    axis = 1 if first.shape[1] >= pool.threads() else 0  # cut X, or the batch if X is short
    positions = math.prod(first.shape[:-1])
    depth = sum(m.shape[-1] for m in maps)
    per_row = positions // first.shape[axis] * depth
    step = max(1, SLAB_ELEMENTS // per_row)
    pieces = numpy_parts(first, first.shape[axis], positions * depth * matrix.shape[-1])

    def part(span: slice) -> None:
        for cut in pool.steps(span, step):
            index = (slice(None), cut) if axis == 1 else (cut,)
            slab = [m[index] for m in maps]
            left = rows(slab[0]) if len(slab) == 1 else rows(xp.concat(slab, axis=-1))
            take(index, xp.reshape(left @ matrix, (*slab[0].shape[:-1], matrix.shape[-1])))

    pool.split(pieces, part)


def transposed_matmul(a: Array, maps: list[Array]) -> Array:
    """``a.T @ b`` of the map ``a`` and ``b``, the ``maps`` side by side along their
    channels, as matrices [B*X*Y][F] and [B*X*Y][L]: the [F][L] sums over every position.
    On NumPy a slab of ``b``'s channels on each core, in pieces whose copy holds at most
    ``SLAB_ELEMENTS`` (or one map's share of a core, if more); each sum as one GEMM's."""
    xp = array_namespace(a, *maps)
    left = rows(a)
    widths = [m.shape[-1] for m in maps]
    width = sum(widths)
    pieces = numpy_parts(a, width, a.shape[-1] * width * left.shape[0])
    if len(maps) == 1 and len(pieces) == 1:
        return left.T @ rows(maps[0])
    out = xp.empty((a.shape[-1], width), dtype=xp.result_type(a, *maps), device=device(a))
    step = max(SLAB_ELEMENTS // left.shape[0], min(widths) // pool.threads(), 1)
    starts = [sum(widths[:i]) for i in range(len(maps))]

    def columns(cut: slice) -> Array:
        """Columns ``cut`` of the maps side by side."""
        held = [
            m[..., max(cut.start - at, 0) : min(cut.stop - at, m.shape[-1])]
            for m, at in zip(maps, starts, strict=True)
            if at < cut.stop and at + m.shape[-1] > cut.start
        ]
        return held[0] if len(held) == 1 else xp.concat(held, axis=-1)

    def part(span: slice) -> None:
        for cut in pool.steps(span, step):
            out[:, cut] = left.T @ rows(columns(cut))

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
