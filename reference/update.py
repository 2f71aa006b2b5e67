"""The update step (section 3.35, Appendix A): ``W += W_D / B`` for every weight array.

Literally a plus sign and no learning rate (standard.md §3).
"""

import numpy as np

from pytest_gostcnn.model.layers import Layer


def update(
    layer: Layer, weights: dict[str, np.ndarray], grads: dict[str, np.ndarray], batch: int
) -> None:
    for name, grad in grads.items():
        weights[name] += grad / batch
