"""Convolution (section 6.1, Appendix A): FILTERS[Rx][Ry][L][F], BIASES[F]."""

from array_api_compat import array_namespace

from pytest_gostcnn.model.layers import Layer

from ._window import crop, offsets, pad, padded_zeros, products, transposed_matmul, zeros
from .library import Array


def forward(layer: Layer, inputs: list[Array], weights: dict[str, Array]) -> list:
    return [forward_side_by_side(layer, inputs[:1], weights)]


def forward_side_by_side(layer: Layer, maps: list[Array], weights: dict[str, Array]) -> Array:
    """The forward of ``maps`` side by side along their channels, as of their concatenation
    (FILTERS' input channels the maps' in order), without the concatenated copy."""
    padded = [pad(m, layer) for m in maps]
    filters = weights["filters"]
    xp = array_namespace(padded[0])
    out = zeros(padded[0], (padded[0].shape[0], *layer.out_shapes[0]))
    out[...] = weights["biases"]
    for rx, row in _window_rows(layer):
        # One product a row of the window: its offsets' windows side by side against the
        # row's filters, a sum Ry times as deep as one offset's (the first layer's L = 3
        # makes one offset's product too shallow for a GEMM to run well).
        matrix = xp.reshape(filters[rx], (-1, filters.shape[-1]))

        def add(index, product):
            out[index] += product

        products([m[index] for index in row for m in padded], matrix, add)
    return out


def backward(
    layer: Layer,
    inputs: list[Array],
    outputs: list[Array],
    out_residuals: list[Array],
    weights: dict[str, Array],
) -> list:
    return [backward_side_by_side(layer, out_residuals[:1], weights)]


def backward_side_by_side(layer: Layer, residuals: list[Array], weights: dict[str, Array]):
    """The backward of output residuals side by side along their channels, as of their
    concatenation (FILTERS' output channels the residuals' in order), without that copy."""
    filters = weights["filters"]
    xp = array_namespace(residuals[0])
    in_residual = padded_zeros(layer, residuals[0])
    channels = filters.shape[2]
    for rx, row in _window_rows(layer):
        # IN_D(window) += OUT_D FILTERS[rx][ry]^T for every ry of the row from one product:
        # OUT_D against the row's filters side by side, each window's part its columns of it
        # (within float64 rounding of that window's own product).
        side_by_side = xp.reshape(
            xp.permute_dims(filters[rx], (2, 0, 1)), (-1, len(row) * channels)
        )

        def add(index, product, row=row):
            for ry, window in enumerate(row):
                in_residual[window][index] += product[..., ry * channels : (ry + 1) * channels]

        products(residuals, side_by_side, add)
    return crop(in_residual, layer)


def gradient(layer: Layer, inputs: list[Array], out_residuals: list[Array]) -> dict[str, Array]:
    padded = pad(inputs[0], layer)
    out_residual = out_residuals[0]
    xp = array_namespace(padded)
    # The shapes from the arrays: the error model stacks two residuals' channels (F).
    width, height, channels = layer.params["Rx"], layer.params["Ry"], padded.shape[-1]
    filters_grad = zeros(padded, (width, height, channels, out_residual.shape[-1]))
    for rx, row in _window_rows(layer):
        # FILTERS_D[rx][ry] = IN(window)^T OUT_D for every ry of the row in one product of
        # the windows side by side, computed as its transpose: OUT_D^T, the left operand
        # OpenBLAS runs this long reduction faster with, is read once for the row. A
        # window's sums are the row product's (within float64 rounding of its own).
        grad = transposed_matmul(out_residual, [padded[index] for index in row])
        filters_grad[rx] = xp.permute_dims(xp.reshape(grad, (-1, height, channels)), (1, 2, 0))
    biases_grad = xp.sum(out_residual, axis=(0, 1, 2))
    return {"filters": filters_grad, "biases": biases_grad}


def _window_rows(layer: Layer) -> list[tuple[int, list[tuple[slice, ...]]]]:
    """The window's rows: ``(rx, [the index of each offset (rx, ry), ry in order])``."""
    rows: dict[int, list[tuple[slice, ...]]] = {}
    for rx, _, index in offsets(layer):
        rows.setdefault(rx, []).append(index)
    return list(rows.items())
