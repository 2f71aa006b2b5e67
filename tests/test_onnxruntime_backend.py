"""The six networks as ONNX files, and the ONNX Runtime backend (``--gost-backend=onnxruntime``)
on its CPU provider, at small shapes.

CI installs onnx and onnxruntime (the ``test`` extra); elsewhere the tests that compute skip,
saying so. Each of the standard's readings where ONNX's operators differ (docs/standard.md
§4) has a mutant here, ONNX's own operator in its place, that the layer items fail.
"""

import json
import subprocess
import sys

import numpy as np
import pytest
from gost_helpers import HALF, MARGIN, swept

from pytest_gostcnn.__main__ import main
from pytest_gostcnn.backend import BackendError, load_backend_class
from pytest_gostcnn.backends.onnxruntime import OnnxRuntimeBackend
from pytest_gostcnn.backends.onnxruntime import backend as ort_backend
from pytest_gostcnn.conformance.layer_cases import layer_cases
from pytest_gostcnn.conformance.verification import (
    CORRECT,
    NOT_CORRECT,
    REFERENCE_GRADE,
    verify_layer,
    verify_network,
)
from pytest_gostcnn.model.layers import LAYER_TYPES
from pytest_gostcnn.performance.cells import Cells
from pytest_gostcnn.run.options import Options
from pytest_gostcnn.run.resolution import resolve

PASSED = (CORRECT, REFERENCE_GRADE)
needs_onnx = pytest.mark.skipif(
    ort_backend.ort is None, reason=f"{ort_backend.INSTALL_HINT} (CI installs it)"
)
CASES = layer_cases()
ONE_CELL = Cells(rank=0, size=1, local_rank=0)


def case_named(type_name: str, tag: str):
    return next(c for c in CASES if c.layer.type.name == type_name and c.tag == tag)


def verify_forward(backend, case, seed=11):
    return verify_layer(
        backend, case.layer, "forward", 2, seed=seed, subject="forward", draw_input=case.draw_input
    )


class ExportedFile(OnnxRuntimeBackend):
    """Runs the files ``export`` wrote, not the graphs the backend builds: the weights the
    suite hands over are ignored, the file's initializers are what runs."""

    name = "exported-file"
    folder = None

    def load_weights(self, network, host):
        return network

    def infer(self, network, weights, image):
        from pytest_gostcnn.backends.onnxruntime.graph import INPUT, OUTPUT

        model = ort_backend.onnx.load(self.folder / f"{network.latin}.onnx")
        return self._run(self.session(model), {INPUT: image}, [OUTPUT])[0]


# Without ONNX Runtime: one clear reason. -------------------------------------------------


def test_without_onnx_runtime_the_reason_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(ort_backend, "_import_problem", ort_backend.INSTALL_HINT)
    assert OnnxRuntimeBackend.unavailable_reason() == (
        "ONNX Runtime is not installed: pip install 'pytest-gostcnn[onnx]'"
    )


def test_the_backend_is_registered_inference_only_with_its_provider_options():
    assert load_backend_class("onnxruntime") is OnnxRuntimeBackend
    assert OnnxRuntimeBackend.training_dtypes == ()
    assert list(OnnxRuntimeBackend.backend_options) == ["providers", "provider_options"]


@pytest.mark.parametrize("step", ["backward", "gradient", "update"])
def test_a_training_step_called_anyway_says_the_backend_runs_inference_only(step):
    # The suite never calls them (no training type); a caller that does gets the reason.
    backend = OnnxRuntimeBackend.__new__(OnnxRuntimeBackend)
    arguments = {"backward": 5, "gradient": 3, "update": 4}[step]
    with pytest.raises(NotImplementedError, match="runs inference only"):
        getattr(backend, step)(*[None] * arguments)


# The export. -----------------------------------------------------------------------------


def verify_exported(folder, networks: list[str], seed: int = 0) -> list:
    """The files ``export`` wrote to ``folder`` verified as section 8 verifies a network
    item at B = 1 and ``seed``: one Verification per network."""
    ExportedFile.folder = folder
    backend, tables = ExportedFile("float32"), load_backend_networks()
    return [verify_network(backend, tables[n], "inference", 1, seed=seed) for n in networks]


@needs_onnx
@pytest.mark.parametrize(
    "networks",
    # М: depthwise at 112x112; Ш: split, concat, shuffle, max pooling, FC (10 s for all six).
    [["M", "Sh"], swept(["M", "G", "V", "S", "R", "Sh"])],
    ids=["M,Sh", "all"],
)
def test_the_exported_networks_run_by_onnx_runtime_are_correct(tmp_path, capsys, networks):
    # The files, not the backend's graphs: the export draws section 8's weights for the
    # seed, so the network item on the same seed verifies the file's initializers.
    given = ["export", "--format", "onnx", "-o", str(tmp_path), "--batch", "1"]
    assert main([*given, "--networks", ",".join(networks)]) == 0
    written = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in written] == [str(tmp_path / f"{n}.onnx") for n in networks]
    for latin, result in zip(networks, verify_exported(tmp_path, networks), strict=True):
        assert result.verdict in PASSED, (latin, result.first_failure)
        assert result.worst.ratio <= HALF, (latin, result.worst.describe())


@needs_onnx
def test_an_exported_file_holds_its_seeds_weights_and_no_other(tmp_path):
    given = ["export", "--format", "onnx", "-o", str(tmp_path), "--networks", "Sh", "--batch", "1"]
    assert main(given) == 0
    (other,) = verify_exported(tmp_path, ["Sh"], seed=1)
    assert other.verdict == NOT_CORRECT and other.worst.ratio >= MARGIN


def load_backend_networks():
    from pytest_gostcnn.model.table_files import load_networks

    return load_networks()


@needs_onnx
def test_an_exported_file_keeps_the_standards_layout_and_says_what_it_holds(tmp_path):
    from pytest_gostcnn.backends.onnxruntime.export import drawn_model

    network = load_backend_networks()["Sh"]
    model = drawn_model(network, 3, seed=5, reading="full-range")
    (given,), (made,) = model.graph.input, model.graph.output
    dims = [d.dim_value for d in given.type.tensor_type.shape.dim]
    assert dims == [3, *network.input_shape]  # [B][X][Y][L]
    assert [d.dim_value for d in made.type.tensor_type.shape.dim] == [3, *network.output_shape]
    props = {p.key: p.value for p in model.metadata_props}
    assert props["gost.network"] == "Ш" and props["gost.seed"] == "5"
    assert props["gost.weights"] == "full-range" and props["gost.batch"] == "3"
    assert model.opset_import[0].version == 17


@needs_onnx
def test_a_row_onnx_cannot_express_is_one_line_naming_it(monkeypatch, capsys, tmp_path):
    from pytest_gostcnn.backends.onnxruntime import graph

    monkeypatch.delitem(graph.EMITTERS, "shuffle")
    status = main(["export", "--format", "onnx", "-o", str(tmp_path), "--networks", "Sh"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    first = next(
        layer for layer in load_backend_networks()["Sh"].layers if layer.type.name == "shuffle"
    )
    assert err.startswith(
        f"error: row {first.number} (shuffle): no ONNX expression for this layer type"
    )


def test_without_onnx_the_export_says_how_to_install_it(monkeypatch, capsys, tmp_path):
    for module in ("export", "graph"):  # imported afresh, without onnx
        monkeypatch.delitem(sys.modules, f"pytest_gostcnn.backends.onnxruntime.{module}", False)
    monkeypatch.setitem(sys.modules, "onnx", None)
    status = main(["export", "--format", "onnx", "-o", str(tmp_path)])
    assert status == 2
    assert capsys.readouterr().err == (
        "error: the export needs onnx: pip install 'pytest-gostcnn[onnx]'\n"
    )


# Section 8 on the CPU provider, and the mutants. --------------------------------------------


# Providers a machine may have (another onnxruntime package brings them), each with the CPU
# behind it for the nodes it does not take; where it is missing, the test skips with the
# backend's reason.
PROVIDERS = ["cpu", "dnnl", "openvino", "xnnpack", "cuda", "tensorrt", "migraphx", "dml"]


@needs_onnx
@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_small_layer_case_is_correct_within_half_the_threshold(provider):
    assert {case.layer.type.name for case in CASES} == set(LAYER_TYPES)
    try:
        backend = OnnxRuntimeBackend("float32", options={"providers": f"{provider},cpu"})
    except BackendError as exc:  # not in this installation: its one line
        pytest.skip(str(exc))
    for case in CASES:
        result = verify_forward(backend, case)
        assert result.verdict in PASSED, (case.tag, result.first_failure)
        assert result.worst.ratio <= HALF, (case.tag, result.worst.describe())


def _native_maxpool(g, layer, inputs, weights):  # ONNX's padding: -inf
    from pytest_gostcnn.backends.onnxruntime.graph import _pads, _window

    return g.node("MaxPool", inputs, "maxpool", pads=_pads(layer), **_window(layer))


def _native_avgpool(g, layer, inputs, weights):  # ONNX's default divisor: in-bounds only
    from pytest_gostcnn.backends.onnxruntime.graph import _pads, _window

    return g.node("AveragePool", inputs, "avgpool", pads=_pads(layer), **_window(layer))


def _map_order_fc(g, layer, inputs, weights):  # flattened in the map's (x, y, l) order
    nhwc = g.node("Transpose", inputs, "nhwc", perm=[0, 2, 3, 1])[0]
    rows = g.node("Flatten", [nhwc], "rows", axis=1)[0]
    out = g.node("Gemm", [rows, weights["weights"], weights["biases"]], "fc", transB=1)[0]
    return g.node("Unsqueeze", [out, g.constant("axes", [2, 3])], "fc_map")


def _inverse_shuffle(g, layer, inputs, weights):  # the residual's way, not OUT's
    from pytest_gostcnn.backends.onnxruntime import graph

    x, y, channels = layer.in_shapes[0]
    swapped = layer.__class__(**{**layer.__dict__, "params": {"G": channels // layer.params["G"]}})
    return graph._shuffle(g, swapped, inputs, weights)


@needs_onnx
@pytest.mark.parametrize(
    ("type_name", "tag", "mutant"),
    [
        ("maxpool", "k3s2p1-negative", _native_maxpool),
        ("avgpool", "k3s2p1", _native_avgpool),
        ("fc", "3x2x4-F5", _map_order_fc),
        ("shuffle", "G3", _inverse_shuffle),
    ],
)
def test_onnxs_own_semantics_fail_the_layer_items(monkeypatch, type_name, tag, mutant):
    from pytest_gostcnn.backends.onnxruntime import graph

    case = case_named(type_name, tag)
    assert verify_forward(OnnxRuntimeBackend("float32"), case).verdict in PASSED
    monkeypatch.setitem(graph.EMITTERS, type_name, mutant)
    result = verify_forward(OnnxRuntimeBackend("float32"), case)
    assert result.verdict == NOT_CORRECT and result.worst.ratio >= MARGIN, result.checks


@needs_onnx
@pytest.mark.parametrize("latin", ["Sh", "M"])
def test_networks_are_correct_within_half_the_threshold(shipped_networks, latin):
    backend = OnnxRuntimeBackend("float32")
    result = verify_network(backend, shipped_networks[latin], "inference", 2, seed=11)
    assert result.verdict in PASSED, result.first_failure
    assert result.worst.ratio <= HALF, result.worst.describe()


@needs_onnx
def test_each_graph_is_built_once_per_layer_or_network_and_batch(monkeypatch, shipped_networks):
    backend = OnnxRuntimeBackend("float32")
    built = []
    session = backend.session
    monkeypatch.setattr(backend, "session", lambda model: built.append(model) or session(model))
    case = case_named("conv", "k3s1p1")
    for _ in range(3):
        verify_forward(backend, case)
    network = shipped_networks["Sh"]
    loaded = backend.load_weights(network, {})
    rng = np.random.default_rng(0)
    loaded.weights = {
        n: {k: rng.uniform(-1, 1, s) for k, s in layer.weight_shapes.items()}
        for n, layer in ((layer.number, layer) for layer in network.weight_layers)
    }
    for batch in (1, 1, 2, 1):
        image = backend.to_device(rng.uniform(-1, 1, (batch, *network.input_shape)))
        assert backend.infer(network, loaded, image).shape == (batch, *network.output_shape)
    assert len(built) == 3  # the layer's, then the network's at B = 1 and at B = 2


# Providers and data types: one line each. ---------------------------------------------------


@needs_onnx
@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("Vendor", "ONNX Runtime knows no provider 'Vendor'"),
        ("MIGraphX", "MIGraphXExecutionProvider is not available in this ONNX Runtime"),
    ],
)
def test_a_provider_that_is_unknown_or_missing_is_one_line_naming_the_available(given, problem):
    with pytest.raises(BackendError) as raised:
        OnnxRuntimeBackend("float32", options={"providers": given})
    message = str(raised.value)
    assert problem in message and "\n" not in message
    assert message.endswith(
        "available here: " + ", ".join(ort_backend.ort.get_available_providers())
    )


@needs_onnx
def test_short_provider_names_are_read_and_the_cpu_fallback_is_off_without_the_cpu():
    from pytest_gostcnn.backends.onnxruntime.providers import session_options

    backend = OnnxRuntimeBackend("float32", options={"providers": "cpu"})
    assert backend.providers == ["CPUExecutionProvider"]
    assert backend.peak() is not None  # the CPU's estimate
    ort = ort_backend.ort
    alone = session_options(ort, 1, ["XnnpackExecutionProvider"])
    assert alone.get_session_config_entry("session.disable_cpu_ep_fallback") == "1"
    beside = session_options(ort, 1, ["XnnpackExecutionProvider", "CPUExecutionProvider"])
    with pytest.raises(RuntimeError, match="does not have configuration"):
        beside.get_session_config_entry("session.disable_cpu_ep_fallback")


@needs_onnx
def test_float16_on_the_cpu_provider_is_refused_naming_the_layers_it_computes_in_float32():
    # ONNX Runtime wraps a node without a float16 kernel in Casts to float32.
    with pytest.raises(BackendError, match=r"no float16 kernel for conv, .*between Casts"):
        OnnxRuntimeBackend("float16")


@needs_onnx
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_integer_types_are_refused_with_the_rule_onnx_runtime_breaks(dtype):
    with pytest.raises(BackendError, match=rf"--gost-dtype={dtype}: .*requantises .*in float32"):
        OnnxRuntimeBackend(dtype)


@needs_onnx
def test_onnx_runtimes_qlinearconv_rounds_a_value_just_past_a_tie_the_wrong_way():
    # The refusal's example: 2048 products of 127 by 127 or 126 sum to 32946594 (exact in
    # int32); times 0.01 * 0.01 / 32.143017 that is 102.5000009, which the fixed-point model
    # rounds to 103. A float32 requantisation gives 102.
    from onnx import TensorProto, helper, numpy_helper

    ort, length, first = ort_backend.ort, 2048, 1374
    image = np.full((1, length, 1, 1), 127, np.int8)
    filters = np.where(np.arange(length) < first, 127, 126).astype(np.int8)
    total = int(image.astype(np.int64).ravel() @ filters.astype(np.int64))
    scales = {"xs": 0.01, "ws": 0.01, "ys": 32.14301681518555}
    exact = total * np.float32(0.01).item() ** 2 / scales["ys"]
    assert total == 32946594 and 102.5 < exact < 102.500001
    arrays = {name: np.array(value, np.float32) for name, value in scales.items()}
    arrays.update(
        w=filters.reshape(1, length, 1, 1), **{z: np.array(0, np.int8) for z in "xz wz yz".split()}
    )
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"])
    graph = helper.make_graph(
        [node],
        "requantised",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [1, length, 1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [1, 1, 1, 1])],
        [numpy_helper.from_array(a, name) for name, a in arrays.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": image})[0].item() == 102


# The shipped suite. -----------------------------------------------------------------------


@needs_onnx
@pytest.mark.parametrize("mode", ["training", "both"])
def test_training_is_refused_naming_the_mode_to_give(mode):
    options = Options.parse({"backend": "onnxruntime", "mode": mode})
    with pytest.raises(ValueError) as raised:
        resolve(options, ONE_CELL)
    assert str(raised.value) == (
        f"--gost-mode={mode}: backend 'onnxruntime' declares no data type for training; give "
        "--gost-mode=inference"
    )


@needs_onnx
def test_the_shipped_suite_passes_in_inference_with_its_checks(tmp_path):
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    command += ["--gost-backend=onnxruntime", "--gost-networks=Sh", "--gost-batch=1"]
    command += ["--gost-mode=inference", f"--gost-report={report}"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]
    (test,) = json.loads(report.read_text(encoding="utf-8"))["benchmarks"]
    checks = test["cells"][0]["checks"]
    assert checks and all(check["verdict"] in PASSED for check in checks), checks
