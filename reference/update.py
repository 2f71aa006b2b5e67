"""The update step (section 3.35, Appendix A): ``W += W_D / B`` for every weight array.

Literally a plus sign and no learning rate (standard.md §3).
"""

from pytest_gostcnn.model.layers import Layer

from .library import Array


def update(layer: Layer, weights: dict[str, Array], grads: dict[str, Array], batch: int) -> None:
    for name, grad in grads.items():
        weights[name] += grad / batch
