"""The layer kernels of the NumPy backend: Appendix A's arithmetic, the work ordered for
BLAS, the caches and the worker threads (docs/performance.md, "Why the NumPy kernels are
shaped so").

Arrays are the standard's, channels last (docs/standard.md §2). Kernels never write into
their arguments; what they return is theirs alone, fresh or a result nobody holds any more
(``Workspace.result``), never scratch. Every kernel returns its arguments' dtype (the
depthwise gradient sums in float64 on the way).

One module per kind of layer, as ``reference/`` has: ``conv``, ``depthwise``, ``pooling``,
``elementwise`` (ReLU, addition, concat, split, shuffle) and ``fc``, and the update step
(``update``, one for every layer type); convolution's im2col, col2im and weight-gradient
products in ``im2col``, ``col2im`` and ``transposed_product``; what they share
(window geometry, the threaded passes) in ``_shared``, the Numba loops they call in
``compiled``. This package is the kernel set:
``<layer type>_<step>`` (``backends.common.kernel``).
"""

from .conv import conv_backward, conv_forward, conv_gradient
from .depthwise import depthwise_backward, depthwise_forward, depthwise_gradient
from .elementwise import (
    concat_backward,
    concat_forward,
    eltwise_backward,
    eltwise_forward,
    relu_backward,
    relu_forward,
    shuffle_backward,
    shuffle_forward,
    split_backward,
    split_forward,
)
from .fc import fc_backward, fc_forward, fc_gradient
from .pooling import avgpool_backward, avgpool_forward, maxpool_backward, maxpool_forward
from .update import update

__all__ = [
    "avgpool_backward",
    "avgpool_forward",
    "concat_backward",
    "concat_forward",
    "conv_backward",
    "conv_forward",
    "conv_gradient",
    "depthwise_backward",
    "depthwise_forward",
    "depthwise_gradient",
    "eltwise_backward",
    "eltwise_forward",
    "fc_backward",
    "fc_forward",
    "fc_gradient",
    "maxpool_backward",
    "maxpool_forward",
    "relu_backward",
    "relu_forward",
    "shuffle_backward",
    "shuffle_forward",
    "split_backward",
    "split_forward",
    "update",
]
