"""The plugin as a user meets it: ``pytest --gost-...`` in a directory of their own (issue 3).

Runs that must see the installed package as a user's would (the suite collected from the
entry point in an empty directory, a backend verified, a failure rerun) go through a fresh
interpreter (``runpytest_subprocess``); runs that only check options and discovery run
in-process, which is quicker and loads the same entry points. Every run is small: network
Ш (Sh), batch 1, inference, and ``-k`` where a few items suffice.
"""

import json
import re
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_gostcnn.conformance.layer_cases import layer_cases
from pytest_gostcnn.model.network import default_tables_dir

# Here rather than in the root conftest.py: with an editable install the shipped suite lies
# below the repository root, so a user's run loads that conftest too, and there
# pytest_plugins is an error ("non-top-level conftest").
pytest_plugins = ["pytester"]

REPOSITORY = Path(__file__).parent.parent
SMALL = ("--gost-batch=1", "--gost-networks=Sh", "--gost-mode=inference")
SUMMARY_HEADER = "GOST R 57700.36-2021, section 8: verification"
GOST_OPTIONS = {
    "--gost-backend",
    "--gost-dtype",
    "--gost-batch",
    "--gost-mode",
    "--gost-networks",
    "--gost-seed",
    "--gost-tables",
    "--gost-rmse-threshold",
    "--gost-profile",
    "--gost-peak",
    "--gost-report",
    "--gost-local-cell",
}

# Third-party backends, named on the command line as mymod:Class.
MYMOD = '''
import numpy as np

from pytest_gostcnn.backends.numpy import NumpyBackend


class Mine(NumpyBackend):
    name = "mine"


class NotABackend:
    """Has a name, but does not subclass pytest_gostcnn.backend.Backend."""

    name = "not-a-backend"


class NoDevice(NumpyBackend):
    @classmethod
    def unavailable_reason(cls):
        return "no CUDA device"


class ProbeRaises(NumpyBackend):
    """Its availability check fails the way a GPU runtime without a device does."""

    @classmethod
    def unavailable_reason(cls):
        raise RuntimeError("cudaErrorNoDevice")


class RaisesOnRelu(NumpyBackend):
    def forward(self, layer, inputs, weights):
        if layer.type.name == "relu":
            raise RuntimeError("relu kernel missing")
        return super().forward(layer, inputs, weights)


class ReturnsNaN(NumpyBackend):
    def forward(self, layer, inputs, weights):
        return [np.full_like(out, np.nan) for out in super().forward(layer, inputs, weights)]


class Float64(NumpyBackend):
    def to_device(self, host):
        return np.array(host, dtype=np.float64)

    def to_host(self, array):
        return np.asarray(array, dtype=np.float64)


class ScaledConv(NumpyBackend):
    """Every conv output 0.1 % too large: an error that depends on the drawn data."""

    def forward(self, layer, inputs, weights):
        outputs = super().forward(layer, inputs, weights)
        if layer.type.name == "conv":
            outputs = [out * np.float32(1.001) for out in outputs]
        return outputs


class PeakRaises(NumpyBackend):
    def peak(self):
        raise RuntimeError("peak boom")


class PeakIsANumber(NumpyBackend):
    def peak(self):
        return 1e12


class DeviceRaises(NumpyBackend):
    def device(self):
        raise RuntimeError("nvml gone")


class PeakTiny(NumpyBackend):
    def peak(self):
        from pytest_gostcnn.machine.peak import Peak

        return Peak(1e-300, "estimated")


class SystemNotJson(NumpyBackend):
    def system(self):
        return {"handle": object()}


class SystemSpoofs(NumpyBackend):
    def system(self):
        return {"name": "spoofed", "device": "spoofed", "driver": "1.2.3"}


class ScaledConvOnCell3(ScaledConv):
    """ScaledConv on the device of a node's cell 3 only (a faulty GPU 3, say)."""

    def forward(self, layer, inputs, weights):
        if self.cell == 3:
            return super().forward(layer, inputs, weights)
        return NumpyBackend.forward(self, layer, inputs, weights)
'''


@pytest.fixture
def backends(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """``mymod`` (the backends above) and ``badmod`` (fails to import), importable in-process
    and in a subprocess alike.
    """
    pytester.makepyfile(
        mymod=MYMOD,
        badmod='raise ImportError("vendor library libfoo.so not found")\n',
    )
    pytester.syspathinsert()
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))


def as_user(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """``pytest ARGS`` in a fresh interpreter, its plugins found through entry points."""
    return pytester.runpytest_subprocess(*args)


def usage_error(result: pytest.RunResult) -> str:
    """The single error line of a run that ended with a usage error, and no traceback."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.stderr.lines if line.strip()]
    assert len(lines) == 1, result.stderr.str()
    assert lines[0].startswith("ERROR: ")
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    return lines[0]


def ids_of(result: pytest.RunResult, function: str) -> list[str]:
    """The parameter ids of ``function``'s items, as ``--collect-only -q`` lists them."""
    pattern = re.compile(rf"\b{function}\[(.+)\]$")
    return [m.group(1) for line in result.stdout.lines if (m := pattern.search(line))]


def lines_with(result: pytest.RunResult, text: str) -> list[str]:
    return [line for line in result.stdout.lines if text in line]


def reported(result: pytest.RunResult, text: str) -> list[str]:
    """Lines with `text` in the failure reports, before pytest's short test summary
    (which, from pytest 9.1 on, repeats a multi-line failure message in full)."""
    lines = result.stdout.lines
    end = next((i for i, line in enumerate(lines) if "short test summary info" in line), len(lines))
    return [line for line in lines[:end] if text in line]


def summary(result: pytest.RunResult) -> list[str]:
    """The lines of the verification summary, from its section header to pytest's short
    test summary (which, from pytest 9.1 on, repeats a multi-line failure message)."""
    lines = result.stdout.lines
    starts = [i for i, line in enumerate(lines) if SUMMARY_HEADER in line]
    assert len(starts) == 1, result.stdout.str()
    ends = [i for i, line in enumerate(lines) if "short test summary info" in line]
    end = next((i for i in ends if i > starts[0]), len(lines))
    return lines[starts[0] : end]


def summary_row(result: pytest.RunResult, label: str) -> list[str]:
    """The verdict table's row of one network, split into its columns."""
    rows = [line.split() for line in summary(result) if line.startswith(label)]
    assert rows, result.stdout.str()
    return rows[0]


# Discovery: in an empty directory, the suite comes from the installed package.


def test_empty_directory_runs_the_installed_suite_and_prints_the_verdict_table(pytester):
    result = as_user(pytester, "--gost-backend=numpy", *SMALL, "-v")

    # Inference verifies one forward item per layer case and the one network, then times it.
    result.assert_outcomes(passed=len(layer_cases()) + 2)
    assert lines_with(result, "test_network[Sh-inference-B1] PASSED")
    assert summary_row(result, "Ш (Sh)")[2:4] == ["inference", "correct"]


def test_without_gost_backend_the_directorys_own_tests_run(pytester):
    pytester.makepyfile(test_trivial="def test_trivial():\n    pass\n")

    result = as_user(pytester, "--collect-only", "-q")

    assert result.stdout.lines[0] == "test_trivial.py::test_trivial"
    assert not lines_with(result, "test_layer")


def test_plain_pytest_in_this_repository_collects_the_projects_own_tests(pytester, monkeypatch):
    monkeypatch.chdir(REPOSITORY)

    result = pytester.run(
        sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"
    )

    items = [line for line in result.stdout.lines if "::" in line]
    assert items
    assert all(line.startswith("tests/") for line in items)


def test_gost_backend_with_test_paths_runs_those_paths(pytester):
    pytester.makepyfile(test_trivial="def test_trivial():\n    pass\n")

    result = as_user(pytester, "--gost-backend=numpy", "test_trivial.py", "--collect-only", "-q")

    assert result.stdout.lines[0] == "test_trivial.py::test_trivial"
    assert not lines_with(result, "test_layer")


# Item ids.


def test_layer_ids_name_type_step_shape_and_dtype(pytester):
    result = as_user(pytester, "--gost-backend=numpy", "--collect-only", "-q")

    assert "conv-forward-k3s2p1-float32" in ids_of(result, "test_layer")


def test_network_ids_name_latin_letter_mode_and_batch(pytester):
    result = as_user(
        pytester,
        "--gost-backend=numpy",
        "--gost-mode=both",
        "--gost-batch=2",
        "--gost-networks=R",
        "--collect-only",
        "-q",
    )

    assert ids_of(result, "test_network") == ["R-training-B2", "R-inference-B2"]


def test_every_item_id_is_ascii(pytester):
    # All six networks, whose letters are Cyrillic in the standard, in both modes.
    result = as_user(pytester, "--gost-backend=numpy", "--gost-mode=both", "--collect-only", "-q")

    network_ids = ids_of(result, "test_network")
    assert {i.split("-")[0] for i in network_ids} == {"M", "G", "V", "S", "R", "Sh"}
    assert all(i.isascii() for i in ids_of(result, "test_layer") + network_ids)


def test_inference_mode_verifies_forward_steps_only(pytester):
    result = as_user(pytester, "--gost-backend=numpy", *SMALL, "--collect-only", "-q")

    layer_ids = ids_of(result, "test_layer")
    assert len(layer_ids) == len(layer_cases())
    assert {i.split("-")[1] for i in layer_ids} == {"forward"}


# Options: each bad value ends the run with one usage error that names it.

# The arguments, and what the one error line must say.
BAD_OPTIONS = [
    (["--gost-backend=nope"], ["unknown backend 'nope'", "available backends:", "numpy"]),
    (["--gost-batch=0"], ["--gost-batch=0", "from 1 to 1024"]),
    (["--gost-batch=2000"], ["--gost-batch=2000", "from 1 to 1024"]),
    (["--gost-batch=two"], ["--gost-batch=two", "not an integer"]),
    (["--gost-batch=1_0"], ["--gost-batch=1_0", "not an integer"]),  # int() would take it
    (["--gost-networks=,"], ["--gost-networks=,", "no network named"]),
    (["--gost-dtype=float16"], ["--gost-dtype=float16", "backend 'numpy' does not declare"]),
    (["--gost-dtype=int4"], ["--gost-dtype=int4", "not a data type of the standard"]),
    (
        ["--gost-dtype=int8", "--gost-mode=training"],
        ["--gost-dtype=int8", "only float32, float16 for training"],
    ),
    (["--gost-mode=sideways"], ["--gost-mode=sideways", "training, inference, both"]),
    (["--gost-networks=Q"], ["--gost-networks", "unknown network 'Q'"]),
    (["--gost-rmse-threshold=-1"], ["--gost-rmse-threshold=-1", ">= 0"]),
    (["--gost-seed=-3"], ["--gost-seed=-3", "from 0 to"]),
    (["--gost-local-cell=-1"], ["--gost-local-cell=-1", "from 0 to"]),
    (["--gost-local-cell=gpu1"], ["--gost-local-cell=gpu1", "not an integer"]),
]


@pytest.mark.parametrize(
    ("args", "says"), BAD_OPTIONS, ids=[" ".join(args) for args, _ in BAD_OPTIONS]
)
def test_bad_option_is_one_usage_error_naming_it(pytester, args, says):
    line = usage_error(pytester.runpytest("--gost-backend=numpy", *args))

    for fragment in says:
        assert fragment in line


def test_tables_directory_that_does_not_exist_is_a_usage_error(pytester):
    missing = pytester.path / "no-such-tables"

    line = usage_error(pytester.runpytest("--gost-backend=numpy", f"--gost-tables={missing}"))

    assert "--gost-tables" in line
    assert str(missing) in line


def test_broken_table_is_a_usage_error_naming_file_and_row(pytester):
    shipped = (default_tables_dir() / "Sh.yaml").read_text(encoding="utf-8")
    broken = shipped.replace("{n: 5, type: conv,", "{n: 5, type: convolution,")
    assert broken != shipped
    tables = pytester.mkdir("tables")
    (tables / "Sh.yaml").write_text(broken, encoding="utf-8")

    line = usage_error(pytester.runpytest("--gost-backend=numpy", f"--gost-tables={tables}"))

    assert "--gost-tables" in line
    assert "Sh.yaml: row 5: unknown layer type 'convolution'" in line


@pytest.mark.parametrize("spelling", ["Sh", "Ш", "sh", "ш", "shufflenet"])
def test_networks_option_accepts_latin_cyrillic_any_case_and_name_prefix(pytester, spelling):
    result = pytester.runpytest(
        "--gost-backend=numpy",
        "--gost-batch=1",
        "--gost-mode=inference",
        f"--gost-networks={spelling}",
        "--collect-only",
        "-q",
    )

    assert ids_of(result, "test_network") == ["Sh-inference-B1"]


def test_help_lists_every_gost_option_in_its_own_group(pytester):
    lines = pytester.runpytest("--help").stdout.lines
    start = lines.index("GOST R 57700.36-2021 conformance (pytest-gostcnn):")
    group = []
    for line in lines[start + 1 :]:
        if line and not line.startswith(" "):
            break  # the next group's title
        group.append(line)

    assert set(re.findall(r"^  (--gost-[a-z-]+)", "\n".join(group), flags=re.M)) == GOST_OPTIONS


def test_report_header_names_backend_version_device_and_dtype(pytester):
    result = pytester.runpytest("--gost-backend=numpy", *SMALL, "--collect-only")

    (header,) = lines_with(result, "gostcnn: backend")
    assert f"backend numpy {np.__version__} on CPU" in header
    assert "dtype float32" in header


# Third-party backends given as module:Class.


def test_backend_named_as_module_colon_class_is_verified(pytester, backends):
    result = as_user(pytester, "--gost-backend=mymod:Mine", *SMALL, "-k", "conv-forward or network")

    assert lines_with(result, "gostcnn: backend mymod:Mine")
    result.assert_outcomes(
        passed=len([c for c in layer_cases() if c.layer.type.name == "conv"]) + 1
    )


def test_backend_module_that_fails_to_import_is_a_usage_error_saying_so(pytester, backends):
    line = usage_error(pytester.runpytest("--gost-backend=badmod:Backend"))

    assert "module 'badmod' failed to import" in line
    assert "vendor library libfoo.so not found" in line


def test_backend_class_that_is_not_a_backend_is_a_usage_error_saying_so(pytester, backends):
    line = usage_error(pytester.runpytest("--gost-backend=mymod:NotABackend"))

    assert "not a subclass of pytest_gostcnn.backend.Backend" in line


def test_backend_module_without_the_class_is_a_usage_error_saying_so(pytester, backends):
    line = usage_error(pytester.runpytest("--gost-backend=mymod:Missing"))

    assert "module 'mymod' has no 'Missing'" in line


@pytest.mark.parametrize(
    "name",
    [
        "nope",
        "badmod:Backend",
        "mymod:NotABackend",
        "mymod:Missing",
    ],
)
def test_every_discovery_error_lists_the_available_backends(pytester, backends, name):
    line = usage_error(pytester.runpytest(f"--gost-backend={name}"))

    assert re.search(r"available backends: [a-z, ]*\bnumpy\b", line)


def test_unavailable_backend_has_every_item_skipped_with_its_reason(pytester, backends):
    result = as_user(pytester, "--gost-backend=mymod:NoDevice", *SMALL, "-rs")

    # Collected, then skipped: exit code 0, not 5 (nothing collected) or an error.
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(skipped=len(layer_cases()) + 2)
    skips = lines_with(result, "SKIPPED")
    assert skips and all("no CUDA device" in line for line in skips)
    # ... and the summary says loudly that nothing was verified, so it passes for nothing.
    assert lines_with(
        result,
        "gostcnn: NOTHING WAS VERIFIED: backend mymod:NoDevice is unavailable (no CUDA device)",
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--gost-mode=inference"], "--gost-* options were given but the suite did not run"),
        (["--gost-backend=numpy", "."], "the suite did not run: it runs when --gost-backend"),
    ],
    ids=["no-backend", "test-paths"],
)
def test_options_for_a_suite_that_did_not_run_say_so(pytester, args, says):
    result = pytester.runpytest(*args)

    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert lines_with(result, f"gostcnn: {says}")


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("PeakRaises", "its peak() raised RuntimeError: peak boom"),
        ("PeakIsANumber", "its peak() returned float 1000000000000.0, expected a Peak or None"),
        ("DeviceRaises", "its device() raised RuntimeError: nvml gone"),
        ("PeakTiny", "its peak() is 1e-300 MAC/s, not a number of at least 1"),
        ("SystemNotJson", "its system() is not plain JSON data"),
    ],
)
def test_backend_whose_device_or_peak_is_broken_is_one_usage_error(pytester, backends, name, says):
    line = usage_error(pytester.runpytest(f"--gost-backend=mymod:{name}", *SMALL))

    assert f"backend 'mymod:{name}': {says}" in line


def test_backend_system_facts_go_into_the_report_without_replacing_its_own(pytester, backends):
    report = pytester.path / "r.json"
    result = as_user(
        pytester,
        "--gost-backend=mymod:SystemSpoofs",
        *SMALL,
        "-k",
        "concat-forward",
        f"--gost-report={report}",
    )

    assert result.ret == 0
    backend = json.loads(report.read_text(encoding="utf-8"))["system"]["backend"]
    assert backend["driver"] == "1.2.3"
    assert backend["name"] == "mymod:SystemSpoofs" and backend["device"] != "spoofed"


def test_report_header_says_why_a_backend_is_unavailable(pytester, backends):
    result = pytester.runpytest("--gost-backend=mymod:NoDevice", *SMALL, "--collect-only")

    assert lines_with(result, "gostcnn: backend mymod:NoDevice (unavailable: no CUDA device)")


def test_backend_whose_availability_check_raises_is_reported_not_a_crash(pytester, backends):
    result = as_user(pytester, "--gost-backend=mymod:ProbeRaises", *SMALL, "-rs")

    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output
    assert "cudaErrorNoDevice" in output


# A failed verification fails its item and the session goes on.


def test_backend_that_raises_fails_those_items_and_the_session_goes_on(pytester, backends):
    result = as_user(
        pytester,
        "--gost-backend=mymod:RaisesOnRelu",
        *SMALL,
        "-k",
        "relu-forward or concat-forward",
    )

    # Two relu cases (uniform, ties) raise; concat, verified after them, still passes.
    result.assert_outcomes(failed=2, passed=1)
    failures = reported(result, "first failure:")
    assert len(failures) == 2
    assert all("the backend raised RuntimeError: relu kernel missing" in line for line in failures)


def test_backend_returning_nan_fails_the_verification_saying_nan(pytester, backends):
    result = as_user(
        pytester, "--gost-backend=mymod:ReturnsNaN", *SMALL, "-k", "relu-forward-uniform"
    )

    result.assert_outcomes(failed=1)
    (failure,) = reported(result, "first failure:")
    assert "NaN" in failure


def test_backend_returning_the_wrong_dtype_fails_the_verification_saying_dtype(pytester, backends):
    result = as_user(pytester, "--gost-backend=mymod:Float64", *SMALL, "-k", "relu-forward-uniform")

    result.assert_outcomes(failed=1)
    (failure,) = reported(result, "first failure:")
    assert "dtype float64, expected float32" in failure


@pytest.mark.parametrize("selected", ["conv-forward-k3s2p1", "test_network"])
def test_failure_prints_seed_and_a_rerun_command_that_reproduces_it(pytester, backends, selected):
    # concat-forward passes and is selected too: the rerun must narrow to the failing item.
    result = as_user(
        pytester,
        "--gost-backend=mymod:ScaledConv",
        *SMALL,
        "--gost-seed=7",
        "-k",
        f"{selected} or concat-forward",
    )
    result.assert_outcomes(failed=1, passed=1)
    (failed,) = lines_with(result, "FAILED")
    (failure,) = reported(result, "first failure:")
    assert lines_with(result, "seed: --gost-seed=7")
    (rerun,) = [line for line in reported(result, "rerun: ") if line.startswith("rerun: ")]
    argv = shlex.split(rerun.removeprefix("rerun: "))
    assert argv[:2] == ["pytest", "--gost-backend=mymod:ScaledConv"]

    again = as_user(pytester, *argv[1:])

    again.assert_outcomes(failed=1)
    assert lines_with(again, "FAILED") == [failed]
    # The same СКО to the last digit: the same seed drew the same data.
    assert reported(again, "first failure:") == [failure]


def test_a_failure_on_a_nodes_cell_k_reruns_on_that_cells_device(pytester, backends):
    # Under mpirun, local rank k builds its backend as cell k (its device); one process
    # does the same with --gost-local-cell=k, and the rerun command of its failure keeps it.
    selected = ("--gost-backend=mymod:ScaledConvOnCell3", *SMALL, "-k", "test_network")
    as_user(pytester, *selected).assert_outcomes(passed=1)  # cell 0's device is fine

    result = as_user(pytester, *selected, "--gost-local-cell=3")

    result.assert_outcomes(failed=1)
    (rerun,) = [line for line in reported(result, "rerun: ") if line.startswith("rerun: ")]
    argv = shlex.split(rerun.removeprefix("rerun: "))
    assert "--gost-local-cell=3" in argv
    as_user(pytester, *argv[1:]).assert_outcomes(failed=1)


def test_summary_gives_a_failed_networks_first_failed_array_and_rerun_command(pytester, backends):
    result = as_user(pytester, "--gost-backend=mymod:ScaledConv", *SMALL, "-k", "test_network")

    assert summary_row(result, "Ш (Sh)")[2:5] == ["inference", "not", "correct"]
    (failure,) = [line for line in summary(result) if line.startswith("Ш (Sh) inference: ")]
    assert failure.removeprefix("Ш (Sh) inference: ").startswith("output: СКО")
    (rerun,) = [line.strip() for line in summary(result) if line.strip().startswith("rerun: ")]
    assert rerun.startswith("rerun: pytest --gost-backend=mymod:ScaledConv ")


# The RMSE threshold override.


def test_zero_threshold_fails_a_float32_layer_with_rounding(pytester):
    result = as_user(
        pytester,
        "--gost-backend=numpy",
        *SMALL,
        "--gost-rmse-threshold=0",
        "-k",
        "conv-forward-k3s2p1",
    )

    # A float32 convolution rounds its sums, so its СКО > 0 = СКОП: not reference-grade.
    result.assert_outcomes(failed=1)
    (failure,) = reported(result, "first failure:")
    assert "СКОП 0.000e+00" in failure


def test_zero_threshold_passes_a_copy_only_layer_as_reference_grade(pytester):
    result = as_user(
        pytester, "--gost-backend=numpy", *SMALL, "--gost-rmse-threshold=0", "-k", "concat-forward"
    )

    # Concatenation copies values: with the same inputs its СКО is 0, which passes only
    # as reference-grade, since no СКО is below a СКОП of 0.
    result.assert_outcomes(passed=1)
