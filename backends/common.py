"""What the NumPy and the xp kernel sets share: the kernel lookup, and the helpers that are
the same in both (layer predicates, window geometry, chunking, channel views, the update)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

from pytest_gostcnn.backend import Backend, BackendError
from pytest_gostcnn.model.layers import Layer

#: The steps a layer type has kernels for (gradient only with weights); update is one
#: function for every type (``update``).
KERNEL_STEPS = ("forward", "backward", "gradient")


# Dispatch: every kernel set is an object (a module, a class or an instance of one) with
# one attribute ``<layer type>_<step>`` per kernel. ---------------------------------------


class MissingKernelError(BackendError):
    """A kernel set has no kernel for a layer type's step (e.g. a type new to the table)."""


def kernel_name(type_name: str, step: str) -> str:
    """The attribute a kernel set holds the ``step`` kernel of ``type_name`` under."""
    if step not in KERNEL_STEPS:
        raise ValueError(f"no kernel step {step!r}: the steps are {', '.join(KERNEL_STEPS)}")
    return f"{type_name}_{step}"


def find_kernel(owner: Any, type_name: str, step: str) -> Callable | None:
    """The ``step`` kernel of layer type ``type_name`` in the kernel set ``owner``, or None."""
    found = getattr(owner, kernel_name(type_name, step), None)
    return found if callable(found) else None


def has_kernel(owner: Any, type_name: str, step: str) -> bool:
    """Whether the kernel set ``owner`` has the ``step`` kernel of layer type ``type_name``."""
    return find_kernel(owner, type_name, step) is not None


def kernel(owner: Any, layer: Layer, step: str) -> Callable:
    """The ``step`` kernel of ``layer``'s type in the kernel set ``owner``.

    Raises ``MissingKernelError`` naming the kernel set, the layer type and the step.
    """
    found = find_kernel(owner, layer.type.name, step)
    if found is None:
        raise MissingKernelError(
            f"the kernel set {kernel_set_name(owner)} has no {step} kernel for layer type "
            f"{layer.type.name!r} (it defines no {kernel_name(layer.type.name, step)})"
        )
    return found


def kernel_set_name(owner: Any) -> str:
    """A kernel set in words: its module's or its class's qualified name."""
    if isinstance(owner, ModuleType):
        return owner.__name__
    cls = owner if isinstance(owner, type) else type(owner)
    return f"{cls.__module__}.{cls.__qualname__}"


# Layers. ---------------------------------------------------------------------------------


def is_pointwise(layer: Layer) -> bool:
    """A 1x1, stride-1, unpadded window: the map itself is the im2col matrix."""
    p = layer.params
    return (p["Rx"], p["Ry"], p["S"], p["Px"], p["Py"]) == (1, 1, 1, 0, 0)


def is_global(layer: Layer) -> bool:
    """A pooling window that is the whole unpadded input map."""
    p, (x, y, _) = layer.params, layer.in_shapes[0]
    return (p["Rx"], p["Ry"], p["Px"], p["Py"]) == (x, y, 0, 0)


class Window(NamedTuple):
    """A window layer's geometry: input X x Y x L, output XO x YO, window RX x RY, stride S,
    padding PX, PY (conv, depthwise, pooling)."""

    x: int
    y: int
    channels: int
    x_out: int
    y_out: int
    rx: int
    ry: int
    s: int
    px: int
    py: int

    @classmethod
    def of(cls, layer: Layer) -> Window:
        (x, y, channels), (x_out, y_out, _) = layer.in_shapes[0], layer.out_shapes[0]
        p = layer.params
        return cls(x, y, channels, x_out, y_out, p["Rx"], p["Ry"], p["S"], p["Px"], p["Py"])


def images_per_chunk(batch: int, bytes_per_image: int, workspace_bytes: int) -> int:
    """Whole images whose buffers fit ``workspace_bytes`` (at least one)."""
    return max(1, min(batch, workspace_bytes // max(bytes_per_image, 1)))


# Channel views: each kernel set copies them out its own way (``contiguous``). ------------

Contiguous = Callable[[Any], Any]


def channel_parts(a, first: int) -> tuple[Any, Any]:
    """Views of ``a``'s first ``first`` channels and of the rest: concat's IN_D, split's OUT."""
    return a[..., :first], a[..., first:]


def _regroup(a, rows: int, contiguous: Contiguous):
    """Channels viewed as [rows][L/rows], transposed: shuffle (rows=G) and its inverse.

    ``contiguous(view)``: a C-ordered copy of the [..][L/rows][rows] view.
    """
    *lead, channels = a.shape
    grid = a.reshape(*lead, rows, channels // rows).swapaxes(-1, -2)
    return contiguous(grid).reshape(a.shape)


def shuffle(layer: Layer, a, contiguous: Contiguous, inverse: bool = False):
    """Shuffle's OUT (``inverse``: its IN_D) from ``a``: channel l = g*(L/G) + j goes to
    f = g + G*j (Appendix A's l/(L/G) + G*(l%(L/G))), IN viewed as [G][L/G], transposed,
    is OUT viewed as [L/G][G]; the residual goes back the other way."""
    groups = layer.params["G"]
    return _regroup(a, a.shape[3] // groups if inverse else groups, contiguous)


def lxy(x, contiguous: Contiguous):
    """IN [B][X][Y][L] as [B][L*X*Y], the order of FC WEIGHTS' last three indices
    (docs/standard.md §4); ``contiguous(view)`` copies the [B][L][X][Y] view in C order."""
    batch, width, height, channels = x.shape
    if width * height == 1:
        return x.reshape(batch, channels)
    return contiguous(x.transpose(0, 3, 1, 2)).reshape(batch, -1)


def from_lxy(rows, layer: Layer):
    """FC's IN_D rows [B][L*X*Y] as a [B][X][Y][L] view (the inverse of ``lxy``)."""
    width, height, channels = layer.in_shapes[0]
    return rows.reshape(rows.shape[0], channels, width, height).transpose(0, 2, 3, 1)


def eltwise_in_residuals(out_residuals: list) -> list:
    """Elementwise addition's IN_D (section 6.7): OUT_D for both addends, the one array."""
    return [out_residuals[0], out_residuals[0]]


# The update (section 3.35). -----------------------------------------------------------------


def update(weights: dict, grads: dict, batch: int, rounded: Callable | None = None) -> None:
    """W += W_D / B, literally (docs/standard.md §3), in place.

    ``rounded(w, grad, batch)``: where it returns an array, the weight's new value (a weight
    the kernel set keeps in a type other than float32); where None, ``+=`` in float32.
    """
    for name, grad in grads.items():
        w = weights[name]
        new = None if rounded is None else rounded(w, grad, batch)
        if new is None:
            w += grad / batch
        else:
            w[...] = new


def declared_options(backend: Backend, options: dict[str, str] | None) -> dict[str, str]:
    """``options`` (``--gost-backend-option``) when ``backend`` declares every key; else
    BackendError naming the first unknown key and the declared ones."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(backend.backend_options))
    if unknown:
        raise BackendError(
            f"backend {backend.name!r} has no option {unknown[0]!r}; its keys: "
            f"{', '.join(backend.backend_options)}"
        )
    return options


class KernelSetBackend(Backend):
    """A backend whose four layer steps are its kernel set's, ``self.kernels`` (an object
    with the executor's ``forward``, ``backward``, ``gradient`` and ``update``)."""

    kernels: Any = None

    def forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        return self.kernels.forward(layer, inputs, weights)

    def backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        return self.kernels.backward(layer, inputs, outputs, out_residuals, weights)

    def gradient(self, layer: Layer, inputs: list, out_residuals: list) -> dict:
        return self.kernels.gradient(layer, inputs, out_residuals)

    def update(self, layer: Layer, weights: dict, grads: dict, batch: int) -> None:
        self.kernels.update(layer, weights, grads, batch)
