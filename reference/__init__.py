"""The float64 reference implementation of the nine typical layers (Appendix A).

One module per layer type, each with ``forward``, ``backward`` and, for the layers with
weights, ``gradient``; ``update`` is one rule for every weight array. Arrays are in the
standard's layout [B][X][Y][L], of any library of the array API standard (NumPy, PyTorch,
CuPy: ``library.py``); every kernel computes in its arguments' library and dtype, and the
reference is this code run on float64. ``ReferenceKernels`` hands them to
the executor (``pytest_gostcnn.model.executor``), which runs whole networks.
"""

from types import ModuleType

from pytest_gostcnn.model.layers import Layer

from . import avgpool, concat, conv, depthwise, eltwise, fc, maxpool, relu, shuffle, split
from .update import update

MODULES: dict[str, ModuleType] = {
    "conv": conv,
    "maxpool": maxpool,
    "avgpool": avgpool,
    "relu": relu,
    "concat": concat,
    "split": split,
    "depthwise": depthwise,
    "eltwise": eltwise,
    "fc": fc,
    "shuffle": shuffle,
}


class ReferenceKernels:
    """The layer kernels of the reference implementation, for the executor."""

    def forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        return MODULES[layer.type.name].forward(layer, inputs, weights)

    def backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        return MODULES[layer.type.name].backward(layer, inputs, outputs, out_residuals, weights)

    def gradient(self, layer: Layer, inputs: list, out_residuals: list) -> dict:
        return MODULES[layer.type.name].gradient(layer, inputs, out_residuals)

    def update(self, layer: Layer, weights: dict, grads: dict, batch: int) -> None:
        update(layer, weights, grads, batch)


__all__ = ["MODULES", "ReferenceKernels", "update"]
