"""ONNX Runtime's execution providers as ``--gost-backend-option`` gives them: the names,
the provider's options, the device its tensors live on, and the session's settings."""

from __future__ import annotations

from pytest_gostcnn.backend import BackendError

CPU = "CPUExecutionProvider"
SUFFIX = "ExecutionProvider"
# Where a provider keeps its tensors, for inputs and outputs bound there (IO binding);
# every other provider reads and writes host memory, and ONNX Runtime copies for it.
DEVICE_MEMORY = {
    "CUDAExecutionProvider": "cuda",
    "TensorrtExecutionProvider": "cuda",
    "DmlExecutionProvider": "dml",
}


def provider_names(text: str, known: list[str], available: list[str]) -> list[str]:
    """``providers=A,B``: ONNX Runtime's names, in order of preference; a name may drop the
    ``ExecutionProvider`` suffix and its case (``cuda``). BackendError, one line naming a
    provider ONNX Runtime does not know or this installation lacks, and the ones it has."""
    here = f"available here: {', '.join(available)}"
    by_key = {name.lower(): name for name in known}
    by_key.update({name[: -len(SUFFIX)].lower(): name for name in known if name.endswith(SUFFIX)})
    names = []
    for given in (part.strip() for part in text.split(",")):
        if not given:
            raise BackendError(f"--gost-backend-option providers={text}: an empty name; {here}")
        name = by_key.get(given.lower())
        if name is None:
            raise BackendError(
                f"--gost-backend-option providers={text}: ONNX Runtime knows no provider "
                f"{given!r}; {here}"
            )
        if name not in available:
            raise BackendError(
                f"--gost-backend-option providers={text}: {name} is not available in this "
                f"ONNX Runtime installation (another package builds it in); {here}"
            )
        if name not in names:
            names.append(name)
    return names


def provider_options(text: str) -> dict[str, str]:
    """``provider_options=KEY=VALUE,KEY=VALUE``: the first provider's options."""
    options = {}
    for item in (part.strip() for part in text.split(",") if part.strip()):
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise BackendError(
                f"--gost-backend-option provider_options={text}: {item!r} is not KEY=VALUE"
            )
        options[key] = value
    return options


def device_memory(provider: str, options: dict[str, str]) -> tuple[str, int]:
    """The device (ONNX Runtime's device type and id) the provider's tensors live on."""
    kind = DEVICE_MEMORY.get(provider, "cpu")
    return kind, int(options.get("device_id", 0)) if kind != "cpu" else 0


def session_options(ort, threads: int, providers: list[str]):
    """The settings of every session: the cell's cores, threads that sleep while they wait,
    and, where the CPU provider is not among ``providers``, no silent fall-back to it."""
    settings = ort.SessionOptions()
    settings.intra_op_num_threads = threads
    settings.inter_op_num_threads = 1
    settings.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    settings.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    settings.log_severity_level = 3  # errors only: warnings would fill a run's output
    # Spinning threads slow a shared cell down (docs/backends.md, "The PyTorch backend").
    settings.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if CPU not in providers:
        # A node the provider cannot run would run on the CPU, and the CPU's time would
        # be certified as the provider's: session creation fails instead.
        settings.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    return settings
