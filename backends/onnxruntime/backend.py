"""The ONNX Runtime backend: the standard's layers as ONNX graphs (``graph.py``) run by the
execution providers ``--gost-backend-option providers=...`` names (default the CPU's).

Inference only: ONNX Runtime's training package is no longer published. A layer item runs
a graph of that one layer, built once per layer and batch; a network runs one session per
network and batch, its weights initializers, built at its first call. Inputs and outputs
are bound where the provider keeps its tensors (IO binding), so a timed round is the
provider's work and the copy of its output. Without onnx and onnxruntime the module still
imports and ``unavailable_reason()`` says how to install them.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

import numpy as np

from pytest_gostcnn.backend import Backend, BackendError
from pytest_gostcnn.machine.facts import cpu_model
from pytest_gostcnn.machine.peak import Peak
from pytest_gostcnn.machine.threads import cell_cores
from pytest_gostcnn.model import executor
from pytest_gostcnn.model.layers import Layer, make_layer
from pytest_gostcnn.model.network import Network

from ..common import declared_options
from .providers import CPU, device_memory, provider_names, provider_options, session_options

INSTALL_HINT = "ONNX Runtime is not installed: pip install 'pytest-gostcnn[onnx]'"
INFERENCE_ONLY = (
    "the onnxruntime backend runs inference only (ONNX Runtime's training package is no "
    "longer published)"
)
# docs/standard.md §6's fixed-point model keeps each integer sum exact and rounds it once to
# nearest; ONNX Runtime's QLinearConv requantises the sum in float32 (docs/backends.md).
INTEGER_REFUSAL = (
    "--gost-dtype={dtype}: not offered by the onnxruntime backend: ONNX Runtime requantises "
    "QLinearConv's int32 sum in float32, so a value just past a tie rounds the wrong way (the "
    "sum 32946594 at scales 0.01, 0.01 and 32.143017: 102.5000009 gives 102, not 103), where "
    "the fixed-point model of docs/standard.md §6 keeps the sum exact and rounds it once to "
    "nearest"
)

try:
    import onnx
    import onnxruntime as ort
except ModuleNotFoundError:
    onnx = ort = None
    _import_problem: str | None = INSTALL_HINT
except Exception as exc:  # a broken installation: say so instead of failing to import
    onnx = ort = None
    _import_problem = f"ONNX Runtime failed to import: {type(exc).__name__}: {exc}"
else:
    _import_problem = None
    from .graph import INPUT, NUMPY_TYPES, OPSET, OUTPUT, layer_model, network_model


class Tensor:
    """A map or weight array as the provider holds it: an ``OrtValue`` and its shape."""

    __slots__ = ("value", "shape")

    def __init__(self, value) -> None:
        self.value = value
        self.shape = tuple(value.shape())


@dataclass
class LoadedNetwork:
    """A network's weights as ``load_weights`` took them, and its sessions by batch."""

    network: Network
    weights: executor.Weights
    sessions: dict = field(default_factory=dict)


def probe_layers() -> list[Layer]:
    """One small layer of each type, for the float16 check (``float16_problem``)."""
    window = {"Rx": 3, "Ry": 3, "S": 1, "Px": 1, "Py": 1}
    return [
        make_layer("conv", [(5, 4, 4)], F=4, **window),
        make_layer("depthwise", [(5, 4, 4)], **window),
        make_layer("maxpool", [(5, 4, 4)], **window),
        make_layer("avgpool", [(5, 4, 4)], **window),
        make_layer("relu", [(5, 4, 4)]),
        make_layer("concat", [(5, 4, 4), (5, 4, 2)]),
        make_layer("split", [(5, 4, 4)], L1=1),
        make_layer("eltwise", [(5, 4, 4), (5, 4, 4)]),
        make_layer("fc", [(5, 4, 4)], F=3),
        make_layer("shuffle", [(5, 4, 4)], G=2),
    ]


class OnnxRuntimeBackend(Backend):
    """The standard's layers as ONNX graphs on ONNX Runtime's execution providers."""

    name = "onnxruntime"
    version = getattr(ort, "__version__", "")
    # int8 and int16 are declared so that asking for them says why they are refused.
    inference_dtypes = ("float32", "float16", "int8", "int16")
    training_dtypes = ()
    backend_options = {
        "providers": "ONNX Runtime's execution providers in order of preference, e.g. "
        "CUDAExecutionProvider,CPUExecutionProvider or cuda,cpu (default: the CPU's); nodes "
        "fall back to the CPU only where it is listed",
        "provider_options": "the first provider's options as KEY=VALUE,KEY=VALUE, e.g. device_id=1",
    }

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return _import_problem

    def __init__(
        self, dtype: str = "float32", cell: int = 0, options: dict[str, str] | None = None
    ) -> None:
        super().__init__(dtype, cell)
        options = declared_options(self, options)
        if dtype in ("int8", "int16"):
            raise BackendError(INTEGER_REFUSAL.format(dtype=dtype))
        if dtype not in self.inference_dtypes:
            raise BackendError(f"the onnxruntime backend computes float32 and float16, not {dtype}")
        self.providers = provider_names(
            options.get("providers") or CPU, ort.get_all_providers(), ort.get_available_providers()
        )
        self.provider_options = provider_options(options.get("provider_options", ""))
        self.memory = device_memory(self.providers[0], self.provider_options)
        self.threads = cell_cores()
        self._layer_sessions: dict = {}
        if dtype == "float16":
            problem = self.float16_problem()
            if problem is not None:
                raise BackendError(f"--gost-dtype=float16: {problem}")

    # Sessions. ------------------------------------------------------------------------------

    def session(self, model: onnx.ModelProto, settings=None):
        """An inference session of ``model`` on the providers, the first with its options."""
        settings = settings or session_options(ort, self.threads, self.providers)
        options = [self.provider_options] + [{} for _ in self.providers[1:]]
        try:
            return ort.InferenceSession(
                model.SerializeToString(),
                settings,
                providers=self.providers,
                provider_options=options,
            )
        except Exception as exc:  # the provider's refusal, in its words
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendError(
                f"ONNX Runtime ({', '.join(self.providers)}) cannot run the graph "
                f"{model.graph.name!r}: {first}"
            ) from exc

    def float16_problem(self) -> str | None:
        """Why the providers do not compute float16 (None: they do): a layer whose nodes
        ONNX Runtime wraps in Casts to float32, as the CPU provider does, is computed in
        float32 and rounded to float16 after, not in float16."""
        cast = []
        with tempfile.TemporaryDirectory() as folder:
            for layer in probe_layers():
                settings = session_options(ort, self.threads, self.providers)
                settings.optimized_model_filepath = os.path.join(folder, f"{layer.type.name}.onnx")
                self.session(layer_model(layer, 1, "float16"), settings)
                if not os.path.exists(settings.optimized_model_filepath):
                    continue  # a compiled graph is not written back: nothing inserted to see
                nodes = onnx.load(settings.optimized_model_filepath).graph.node
                if any(node.op_type == "Cast" for node in nodes):
                    cast.append(layer.type.name)
        if not cast:
            return None
        return (
            f"ONNX Runtime's {self.providers[0]} has no float16 kernel for {', '.join(cast)}: "
            "it computes them in float32 between Casts, so float16 is not what it computes"
        )

    def _run(self, session, inputs: dict[str, Tensor], outputs: list[str]) -> list[Tensor]:
        binding = session.io_binding()
        for name, tensor in inputs.items():
            binding.bind_ortvalue_input(name, tensor.value)
        kind, index = self.memory
        for name in outputs:
            binding.bind_output(name, kind, index)
        session.run_with_iobinding(binding)
        return [Tensor(value) for value in binding.get_outputs()]

    # The device. ----------------------------------------------------------------------------

    def device(self) -> str:
        if self.providers[0] == CPU:
            return f"CPU: {cpu_model()} ({self.threads} cores), ONNX Runtime {CPU}"
        kind, index = self.memory
        where = f" ({kind}:{index})" if kind != "cpu" else ""
        return f"ONNX Runtime {self.providers[0]}{where}"

    def peak(self) -> Peak | None:
        # The CPU's estimate on the CPU provider; another provider's peak is given.
        return super().peak() if self.providers[0] == CPU else None

    def system(self) -> dict:
        return {
            "onnxruntime": ort.__version__,
            "onnx": onnx.__version__,
            "onnx_opset": OPSET,
            "providers": list(self.providers),
            "provider_options": dict(self.provider_options),
            "cpu_fallback": CPU in self.providers,
            "intra_op_threads": self.threads,
        }

    # Data. ----------------------------------------------------------------------------------

    def to_device(self, host: np.ndarray) -> Tensor:
        kind, index = self.memory
        array = np.array(host, dtype=NUMPY_TYPES[self.dtype])  # a copy, the provider's own
        return Tensor(ort.OrtValue.ortvalue_from_numpy(array, kind, index))

    def to_host(self, array: Tensor) -> np.ndarray:
        return array.value.numpy()

    # Layers: one graph per layer and batch. -------------------------------------------------

    def forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        batch = inputs[0].shape[0]
        key = (layer.type.name, tuple(layer.params.items()), layer.in_shapes, batch)
        session = self._layer_sessions.get(key)
        if session is None:
            session = self._layer_sessions[key] = self.session(
                layer_model(layer, batch, self.dtype)
            )
        given = {f"in{i + 1}": tensor for i, tensor in enumerate(inputs)} | dict(weights)
        return self._run(session, given, [f"out{i + 1}" for i in range(len(layer.out_shapes))])

    def backward(self, layer, inputs, outputs, out_residuals, weights):
        raise NotImplementedError(INFERENCE_ONLY)

    def gradient(self, layer, inputs, out_residuals):
        raise NotImplementedError(INFERENCE_ONLY)

    def update(self, layer, weights, grads, batch):
        raise NotImplementedError(INFERENCE_ONLY)

    # Networks: one session per network and batch, the weights its initializers. -----------

    def load_weights(self, network: Network, host: executor.Weights) -> LoadedNetwork:
        return LoadedNetwork(network, host)

    def infer(self, network: Network, weights: LoadedNetwork, image: Tensor) -> Tensor:
        batch = image.shape[0]
        session = weights.sessions.get(batch)
        if session is None:
            model = network_model(network, weights.weights, batch, self.dtype)
            session = weights.sessions[batch] = self.session(model)
        return self._run(session, {INPUT: image}, [OUTPUT])[0]
