"""The plugin as a user meets it: ``pytest --gost-...`` in a directory of their own.

Runs that must see the installed package as a user's would (the suite collected from the
entry point in an empty directory, a backend verified, a failure rerun) go through a fresh
interpreter (``as_user``); runs that only check options and discovery run in-process, which
is quicker and loads the same entry points. Every run is small: network Ш (Sh), batch 1,
inference, and ``-k`` where a few items suffice.

The tests read what a run found as data, not from pytest's terminal text, whose wording
changes between pytest versions: the exit code, the ``--gost-report`` JSON, and the test
reports (an in-process run's ``HookRecorder``; a subprocess's, recorded by
``tests/gost_test_recorder.py``), whose longrepr is a failure's message. A few tests check
the layout of the plugin's own terminal summary, and a usage error's message is read where
pytest prints it, on stderr.
"""

import os
import re
import shlex
import subprocess
import sys
import types
from xml.etree import ElementTree

import numpy as np
import pytest
from gost_helpers import BACKENDS, SMALL, Run, directory, read_report, suite, usage_error
from gost_test_recorder import Recorded, as_user, in_process, outcomes

# Imported here, so that this process keeps it: an in-process run would otherwise import it
# afresh (pytester forgets the modules a run imported), a second each (its compiled kernels).
from pytest_gostcnn.backends.numpy import NumpyBackend  # noqa: F401
from pytest_gostcnn.conformance.layer_cases import layer_cases, network_cases, saturating_cases
from pytest_gostcnn.model.table_files import default_tables_dir, load_networks
from pytest_gostcnn.run.summary import LAST_LINE_PREFIX

# Here rather than in the root conftest.py: with an editable install the shipped suite lies
# below the repository root, so a user's run loads that conftest too, and there
# pytest_plugins is an error ("non-top-level conftest").
pytest_plugins = ["pytester"]

# The layer cases of Ш at its own shapes, which a SMALL run verifies beside the small ones.
SH_CASES = network_cases({"Sh": load_networks()["Sh"]})
SUMMARY_HEADER = "GOST R 57700.36-2021, section 8: verification"
GOST_GROUP = "GOST R 57700.36-2021 conformance (pytest-gostcnn)"
GOST_OPTIONS = {
    "--gost-backend",
    "--gost-dtype",
    "--gost-batch",
    "--gost-mode",
    "--gost-networks",
    "--gost-seed",
    "--gost-tables",
    "--gost-weights",
    "--gost-resume",
    "--gost-compare",
    "--gost-compare-fail",
    "--gost-versus",
    "--gost-backend-option",
    "--gost-stall-timeout",
    "--gost-rmse-threshold",
    "--gost-reference",
    "--gost-reference-memory",
    "--gost-profile",
    "--gost-images",
    "--gost-peak",
    "--gost-report",
    "--gost-local-cell",
    "--gost-allow-unavailable",
}
PASSED = ("correct", "reference-grade")


@pytest.fixture
def backends(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """``mymod`` (tests/gost_test_backends.py) and ``badmod`` (fails to import), importable
    in-process and in a subprocess alike.
    """
    (pytester.path / "mymod.py").write_text(BACKENDS.read_text(encoding="utf-8"), "utf-8")
    pytester.makepyfile(badmod='raise ImportError("vendor library libfoo.so not found")\n')
    pytester.syspathinsert()
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))


def verified(pytester: pytest.Pytester, *args: str) -> tuple[Recorded, dict]:
    """``as_user`` with ``--gost-report``: what the run recorded, and its report."""
    path = pytester.path / "gost-report.json"
    path.unlink(missing_ok=True)
    run = as_user(pytester, *args, f"--gost-report={path}")
    return run, read_report(path)


def verified_here(pytester: pytest.Pytester, *args: str) -> tuple[Recorded, dict]:
    """``verified`` in this process (``in_process``), for runs that verify nothing: the
    backend is unavailable."""
    path = pytester.path / "gost-report.json"
    path.unlink(missing_ok=True)
    run = in_process(pytester, *args, f"--gost-report={path}")
    return run, read_report(path)


def header(pytester: pytest.Pytester, *args: str) -> str:
    """The backend line of the run's report header, as the ``pytest_report_header`` hook
    gives the terminal its lines."""
    config = pytester.parseconfigure(*args)
    answers = config.hook.pytest_report_header(config=config, start_path=config.rootpath)
    lines = [
        line for answer in answers for line in ([answer] if isinstance(answer, str) else answer)
    ]
    (line,) = [line for line in lines if line.startswith("gostcnn: backend ")]
    return line


def failure_message(longrepr: str) -> dict[str, str]:
    """A suite item's failure message (plugin/items.py) by its lines' labels: ``first
    failure``, ``seed``, ``rerun``."""
    labelled = (line.partition(": ") for line in longrepr.splitlines())
    return {
        label: text
        for label, sep, text in labelled
        if sep and label in {"first failure", "seed", "rerun"}
    }


# Discovery: in an empty directory, the suite comes from the installed package.


def test_empty_directory_runs_the_installed_suite_and_prints_the_verdict_table(pytester):
    run, report = verified(pytester, "--gost-backend=numpy", *SMALL)

    # Inference verifies one forward item per small layer case and per distinct layer of
    # Ш at its own shape, and the one network, then times it.
    small, shaped = len(layer_cases()), len(SH_CASES)
    assert run.ret == pytest.ExitCode.OK
    assert run.outcomes() == {"passed": small + shaped + 2}
    assert run.ids("test_network") == ["Sh-inference-B1"]
    assert len(report["verification"]["layers"]) == small + shaped
    assert sum(1 for layer in report["verification"]["layers"] if layer.get("rows")) == shaped
    assert all(layer["verdict"] in PASSED for layer in report["verification"]["layers"])
    assert not (pytester.path / ".benchmarks").exists()  # pytest-benchmark's, unused
    (network,) = report["verification"]["networks"]
    assert (network["network"], network["mode"], network["verdict"]) == (
        "Sh",
        "inference",
        "correct",
    )
    # The verdict table's layout: the section, the run, the layers, the table.
    run.result.stdout.fnmatch_lines(
        [
            f"*{SUMMARY_HEADER}*",
            "backend numpy * on CPU*; dtype float32; batch 1; seed *",
            f"layers: {small + shaped} layer steps verified ({small} small edge cases, "
            f"{shaped} at the networks' own shapes), 0 failed",
            "network *mode *verdict *worst СКО/СКОП *array",
            "Ш (Sh)   inference  correct *output",
        ],
        consecutive=True,
    )


def test_without_gost_backend_the_directorys_own_tests_run(pytester):
    pytester.makepyfile(test_trivial="def test_trivial():\n    pass\n")

    run = in_process(pytester, "--collect-only", "-q")

    assert run.items == ["test_trivial.py::test_trivial"]


def test_gost_backend_with_test_paths_runs_those_paths(pytester):
    pytester.makepyfile(test_trivial="def test_trivial():\n    pass\n")

    run = in_process(pytester, "--gost-backend=numpy", "test_trivial.py", "--collect-only", "-q")

    assert run.items == ["test_trivial.py::test_trivial"]


# Item ids.


def test_layer_ids_name_type_step_shape_and_dtype(pytester):
    run = in_process(pytester, "--gost-backend=numpy", "--collect-only", "-q")

    assert "conv-forward-k3s2p1-float32" in run.ids("test_layer")


def test_network_ids_name_latin_letter_mode_and_batch(pytester):
    run = in_process(
        pytester,
        "--gost-backend=numpy",
        "--gost-mode=both",
        "--gost-batch=2",
        "--gost-networks=R",
        "--collect-only",
        "-q",
    )

    assert run.ids("test_network") == ["R-training-B2", "R-inference-B2"]


def test_every_item_id_is_ascii(pytester):
    # All six networks, whose letters are Cyrillic in the standard, in both modes.
    run = in_process(pytester, "--gost-backend=numpy", "--gost-mode=both", "--collect-only", "-q")

    network_ids = run.ids("test_network")
    assert {i.split("-")[0] for i in network_ids} == {"M", "G", "V", "S", "R", "Sh"}
    assert all(nodeid.isascii() for nodeid in run.items)
    assert all(i.isascii() for i in run.ids("test_layer") + network_ids)


def test_collect_only_ends_with_pytests_count_and_leaves_no_folder_behind(pytester):
    # Nothing ran: no "RUN INCOMPLETE" verdict after pytest's count, and no empty
    # .benchmarks (pytest-benchmark's storage, made as it starts) in the user's directory.
    run = in_process(pytester, "--gost-backend=numpy", *SMALL, "--collect-only", "-q")

    assert run.ret == pytest.ExitCode.OK
    # pytest's own count ends the output: none of the suite's last lines follows it.
    assert not run.result.outlines[-1].startswith(LAST_LINE_PREFIX)
    assert not any("INCOMPLETE" in line for line in run.result.outlines)
    assert not (pytester.path / ".benchmarks").exists()


def test_the_suite_run_where_the_project_sets_testpaths_names_no_testpaths(pytester):
    # The shipped suite runs, not the project's testpaths: pytest's header must not say so.
    pytester.makeini("[pytest]\ntestpaths = tests\n")
    pytester.mkdir("tests")
    result = pytester.runpytest("--gost-backend=numpy", *SMALL, "--collect-only")

    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["configfile: tox.ini", "collected 68 items"])
    assert not [line for line in result.outlines if line.startswith("testpaths:")]


def test_inference_mode_verifies_forward_steps_only(pytester):
    run = in_process(pytester, "--gost-backend=numpy", *SMALL, "--collect-only", "-q")

    layer_ids = run.ids("test_layer")
    assert len(layer_ids) == len(layer_cases()) + len(SH_CASES)
    assert {i.split("-")[1] for i in layer_ids} == {"forward"}


def test_an_integer_type_adds_the_saturating_layer_items(pytester):
    # docs/standard.md §6: the clamp is verified on items whose scales leave values past the
    # range; a floating-point run has no such items.
    integer = in_process(
        pytester, "--gost-backend=numpy", *SMALL, "--gost-dtype=int8", "--collect-only", "-q"
    )
    saturating = [i for i in integer.ids("test_layer") if "saturating" in i]
    assert len(saturating) == len(saturating_cases()) == 5
    assert len(integer.ids("test_layer")) == len(layer_cases()) + len(SH_CASES) + 5
    floating = in_process(pytester, "--gost-backend=numpy", *SMALL, "--collect-only", "-q")
    assert not [i for i in floating.ids("test_layer") if "saturating" in i]


# Options: each bad value ends the run with one usage error that names it.

# The arguments, and what the one error line must say.
BAD_OPTIONS = [
    (["--gost-backend=nope"], ["unknown backend 'nope'", "available backends:", "numpy"]),
    (["--gost-batch=0"], ["--gost-batch=0", "from 1 to 1024"]),
    (["--gost-batch=2000"], ["--gost-batch=2000", "from 1 to 1024"]),
    (["--gost-batch=two"], ["--gost-batch=two", "not an integer"]),
    (["--gost-batch=1_0"], ["--gost-batch=1_0", "not an integer"]),  # int() would take it
    (["--gost-networks=,"], ["--gost-networks=,", "names no network"]),
    (["--gost-networks="], ["--gost-networks=", "names no network", "leave the option out"]),
    (["--gost-dtype=float16"], ["--gost-dtype=float16", "backend 'numpy' does not declare"]),
    (["--gost-dtype=int4"], ["--gost-dtype=int4", "not a data type of the standard"]),
    (  # integer types verify inference only (docs/standard.md §6)
        ["--gost-dtype=int8"],
        ["--gost-dtype=int8", "allows only float32, float16 for training", "--gost-mode=inference"],
    ),
    (["--gost-dtype=INT8"], ["--gost-dtype=INT8", "not a data type", "did you mean int8?"]),
    (
        ["--gost-dtype=int8", "--gost-mode=inference", "--gost-rmse-threshold=0"],
        ["--gost-rmse-threshold=0", "in int8 every layer that requantises rounds"],
    ),
    (["--gost-mode=sideways"], ["--gost-mode=sideways", "training, inference, both"]),
    (["--gost-networks=Q"], ["--gost-networks", "unknown network 'Q'"]),
    (["--gost-networks=R,,Sh"], ["--gost-networks=R,,Sh", "an empty name between commas"]),
    (["--gost-networks=Sh,Sh"], ["--gost-networks=Sh,Sh", "names Sh (Ш) twice ('Sh' and 'Sh')"]),
    (["--gost-networks=M,Ш,sh"], ["--gost-networks=M,Ш,sh", "names Sh (Ш) twice ('Ш' and 'sh')"]),
    (["--gost-rmse-threshold=-1"], ["--gost-rmse-threshold=-1", ">= 0"]),
    (["--gost-seed=-3"], ["--gost-seed=-3", "from 0 to"]),
    (["--gost-local-cell=-1"], ["--gost-local-cell=-1", "from 0 to"]),
    (["--gost-local-cell=gpu1"], ["--gost-local-cell=gpu1", "not an integer"]),
    (["--gost-images=0"], ["--gost-images=0", "from 1 to"]),
    (["--gost-reference-memory=lots"], ["--gost-reference-memory=lots", "not a size"]),
    (  # a bound too small for one image names the smallest that works
        ["--gost-networks=Sh", "--gost-reference-memory=10MB"],
        ["--gost-reference-memory", "of 10MB is too small for one image of Sh at B=2", "works is"],
    ),
    (
        ["--gost-batch=4", "--gost-images=3"],
        ["--gost-images=3: fewer than one batch of --gost-batch=4"],
    ),
    (
        ["--gost-profile=full", "--gost-images=5000"],
        ["--gost-images=5000 and --gost-profile=full: give one of them"],
    ),
    (  # even the default profile, given, asks for what the image count replaces
        ["--gost-profile=quick", "--gost-images=5000"],
        ["--gost-images=5000 and --gost-profile=quick: give one of them"],
    ),
]


@pytest.mark.parametrize(
    ("args", "says"), BAD_OPTIONS, ids=[" ".join(args) for args, _ in BAD_OPTIONS]
)
def test_bad_option_is_one_usage_error_naming_it(pytester, args, says):
    usage_error(pytester.runpytest("--gost-backend=numpy", *args), *says)


def test_tables_directory_that_does_not_exist_is_a_usage_error(pytester):
    missing = pytester.path / "no-such-tables"

    result = pytester.runpytest("--gost-backend=numpy", f"--gost-tables={missing}")

    usage_error(result, "--gost-tables", str(missing))


def test_broken_table_is_a_usage_error_naming_file_and_row(pytester):
    shipped = (default_tables_dir() / "Sh.yaml").read_text(encoding="utf-8")
    broken = shipped.replace("{n: 5, type: conv,", "{n: 5, type: convolution,")
    assert broken != shipped
    tables = pytester.mkdir("tables")
    (tables / "Sh.yaml").write_text(broken, encoding="utf-8")

    result = pytester.runpytest("--gost-backend=numpy", f"--gost-tables={tables}")

    usage_error(result, "--gost-tables", "Sh.yaml: row 5: unknown layer type 'convolution'")


@pytest.mark.parametrize("spelling", ["Sh", "Ш", "sh", "ш", "shufflenet"])
def test_networks_option_accepts_latin_cyrillic_any_case_and_name_prefix(pytester, spelling):
    items, reprec = pytester.inline_genitems(
        "--gost-backend=numpy",
        "--gost-batch=1",
        "--gost-mode=inference",
        f"--gost-networks={spelling}",
    )

    assert reprec.ret == pytest.ExitCode.OK
    networks = [item.callspec.id for item in items if item.originalname == "test_network"]
    assert networks == ["Sh-inference-B1"]


def test_help_lists_every_gost_option_in_its_own_group(pytester):
    class Options:
        """Keeps the run's option parser, which --help renders group by group."""

        def pytest_addoption(self, parser: pytest.Parser) -> None:
            self.parser = parser

    options = Options()
    result = pytester.runpytest("--help", plugins=[options])

    assert result.ret == pytest.ExitCode.OK
    group = options.parser.getgroup("gostcnn")
    assert {name for option in group.options for name in option.names()} == GOST_OPTIONS
    # The group's title and its options, as the plugin words them.
    assert all(text in result.stdout.str() for text in [GOST_GROUP, *GOST_OPTIONS])


class WorkerOptions:
    """The options pytest-xdist declares (``--numprocesses``, short ``-n``; ``--dist``),
    for runs without it."""

    def pytest_addoption(self, parser: pytest.Parser) -> None:
        parser.addoption("--numprocesses", dest="numprocesses", default=None)
        parser.addoption("--dist", dest="dist", default="no")


@pytest.mark.parametrize("args", [["--numprocesses=2"], ["--dist=load"]], ids=["-n", "--dist"])
def test_parallel_workers_are_one_usage_error(pytester, args):
    # Workers would each verify a share of the items: no process would hold the verdicts,
    # the evaluation or the exit status whole.
    result = pytester.runpytest(
        "-p", "no:xdist", "--gost-backend=numpy", *args, plugins=[WorkerOptions()]
    )

    usage_error(result, "pytest-xdist (-n, --dist): the GOST suite runs in one process", "mpirun")


def test_pytest_xdist_itself_is_refused_with_the_same_usage_error(pytester):
    pytest.importorskip("xdist", reason="pytest-xdist is not installed: pip install -e '.[test]'")

    result = pytester.runpytest_subprocess("--gost-backend=numpy", *SMALL, "-n", "2")

    usage_error(result, "pytest-xdist (-n, --dist): the GOST suite runs in one process")


def test_workers_without_the_suite_are_none_of_its_business(pytester):
    pytester.makepyfile(test_trivial="def test_trivial():\n    pass\n")

    result = pytester.runpytest("-p", "no:xdist", "--numprocesses=2", plugins=[WorkerOptions()])

    assert result.ret == pytest.ExitCode.OK


# pytest-benchmark's options for its own loop, which the suite refuses, as a user gives them.
NOT_HONOURED = [
    "--benchmark-min-rounds=50",
    "--benchmark-max-time=2",
    "--benchmark-min-time=0.1",
    "--benchmark-calibration-precision=5",
    "--benchmark-precision=0.02",
    "--benchmark-confidence=0.9",
    "--benchmark-warmup=on",
    "--benchmark-warmup-iterations=10",
    "--benchmark-cprofile-loops=3",
]


@pytest.mark.parametrize("option", NOT_HONOURED)
def test_a_benchmark_option_the_suite_cannot_honour_is_one_usage_error(pytester, option):
    result = pytester.runpytest("--gost-backend=numpy", *SMALL, option)

    usage_error(result, f"{option}: the GOST suite")


def test_a_refused_benchmark_option_given_with_a_space_is_named_with_its_value(pytester):
    result = pytester.runpytest("--gost-backend=numpy", "--benchmark-min-rounds", "50")

    usage_error(result, "--benchmark-min-rounds=50: the GOST suite fixes each test's rounds")


def test_a_refused_benchmark_option_in_the_ini_files_addopts_is_refused_too(pytester):
    pytester.makeini("[pytest]\naddopts = --benchmark-max-time=2\n")

    result = pytester.runpytest("--gost-backend=numpy")

    usage_error(result, "--benchmark-max-time=2: the GOST suite", "--gost-images=N")


def test_a_refused_benchmark_option_in_pytest_addopts_is_refused_too(pytester, monkeypatch):
    # Even at pytest-benchmark's own default: the user asked for it, and it would be ignored.
    monkeypatch.setenv("PYTEST_ADDOPTS", "--benchmark-min-rounds=5")

    result = pytester.runpytest("--gost-backend=numpy")

    usage_error(result, "--benchmark-min-rounds=5: the GOST suite")


def test_benchmark_options_of_a_run_without_the_suite_are_none_of_its_business(pytester):
    pytester.makepyfile(test_trivial="def test_trivial():\n    pass\n")

    result = pytester.runpytest("--benchmark-min-rounds=50", "--benchmark-warmup=on")

    assert result.ret == pytest.ExitCode.OK


def test_a_histogram_without_pygal_is_one_usage_error_saying_what_to_install(pytester, monkeypatch):
    monkeypatch.setitem(sys.modules, "pygal", None)  # its import fails, installed or not

    result = pytester.runpytest("--gost-backend=numpy", *SMALL, "--benchmark-histogram")

    usage_error(result, "--benchmark-histogram:", "pygal", "pip install pygal pygaljs")


def test_a_histogram_with_its_packages_is_not_refused(pytester, monkeypatch):
    for package in ("pygal", "pygaljs"):
        monkeypatch.setitem(sys.modules, package, types.ModuleType(package))

    result = pytester.runpytest(
        "--gost-backend=numpy", *SMALL, "--benchmark-histogram", "--collect-only", "-q"
    )

    assert result.ret == pytest.ExitCode.OK


def test_report_header_names_backend_version_device_and_dtype(pytester):
    line = header(pytester, "--gost-backend=numpy", *SMALL)

    assert f"backend numpy {np.__version__} on CPU" in line
    assert "dtype float32" in line
    assert "weights scaled" in line
    assert "weights full-range" in header(
        pytester, "--gost-backend=numpy", "--gost-weights=full-range", *SMALL
    )


def test_pytest_benchmarks_header_line_says_its_loop_defaults_are_not_the_suites(pytester):
    # The suite runs its own rounds: min_rounds=5 and the rest would mislead a reader.
    suite_run = pytester.runpytest("--gost-backend=numpy", *SMALL, "--collect-only")
    suite_run.stdout.fnmatch_lines(
        [
            "benchmark: * (timer time.perf_counter; its loop's defaults unused: the suite runs "
            "its own rounds)",
            "gostcnn: backend numpy *",
        ],
        consecutive=True,
    )
    suite_run.stdout.no_fnmatch_line("*min_rounds=*")
    # A run that asks nothing of the plugin keeps pytest-benchmark's line as it is.
    pytester.makepyfile(test_trivial="def test_trivial():\n    pass\n")
    pytester.runpytest("--collect-only").stdout.fnmatch_lines(["benchmark: *min_rounds=5*"])


# The ini file: every option is also a setting gost_NAME, and the command line wins.


def test_every_option_can_be_set_in_the_ini_file(pytester):
    pytester.makeini(
        "[pytest]\ngost_backend = numpy\ngost_batch = 3\ngost_mode = inference\n"
        "gost_seed = 11\ngost_networks = Sh\n"
    )

    line = header(pytester)

    assert "dtype float32; batch 3; mode inference; seed 11" in line


def test_the_command_line_wins_over_the_ini_file(pytester):
    pytester.makeini("[pytest]\ngost_backend = numpy\ngost_batch = 3\n")

    line = header(pytester, "--gost-batch=5")

    assert "; batch 5;" in line


def test_a_profile_in_the_ini_file_and_an_image_count_are_one_usage_error(pytester):
    pytester.makeini("[pytest]\ngost_profile = full\n")

    result = pytester.runpytest("--gost-backend=numpy", "--gost-images=5000")

    usage_error(result, "--gost-images=5000 and --gost-profile=full: give one of them")


def test_a_bad_ini_setting_is_one_usage_error_naming_the_setting(pytester):
    pytester.makeini("[pytest]\ngost_backend = numpy\ngost_batch = zero\n")

    usage_error(pytester.runpytest(), "gost_batch=zero: not an integer")


@pytest.mark.parametrize(
    "ini",
    ["[pytest]\ngost_bacth = 4\n", "[pytest]\ngost_backend = numpy\ngost_bacth = 4\n"],
    ids=["alone", "beside-a-setting"],
)
def test_a_misspelt_ini_setting_is_one_usage_error_naming_it(pytester, ini):
    pytester.makeini(ini)

    usage_error(
        pytester.runpytest(), "gost_bacth (in tox.ini): not a setting", "did you mean gost_batch?"
    )


def test_a_misspelt_setting_given_with_o_is_one_usage_error_naming_it(pytester):
    result = pytester.runpytest("--gost-backend=numpy", "-o", "gost_seeds=3")

    usage_error(result, "gost_seeds (given with -o): not a setting", "did you mean gost_seed?")


def test_a_backend_in_pyproject_runs_the_suite_and_a_switch_there_holds(pytester, backends):
    # CI configures the run once: plain `pytest` runs the suite on the backend named there,
    # and gost_allow_unavailable = true keeps a machine without the device at exit 0.
    pytester.makepyprojecttoml(
        "[tool.pytest.ini_options]\n"
        'gost_backend = "mymod:NoDevice"\n'
        "gost_allow_unavailable = true\n"
        'gost_networks = "Sh"\n'
        'gost_mode = "inference"\n'
    )

    run = in_process(pytester)  # nothing is verified: the backend is unavailable

    assert run.ret == pytest.ExitCode.OK
    assert run.ids("test_network") == ["Sh-inference-B2"]  # the default batch
    assert run.outcomes() == {"skipped": len(layer_cases()) + len(SH_CASES) + 2}


# Third-party backends given as module:Class.


def test_backend_named_as_module_colon_class_is_verified(pytester, backends):
    run, report = verified(
        pytester, "--gost-backend=mymod:Mine", *SMALL, "-k", "conv-forward or network"
    )

    # The report names the backend as it names itself; the options, as it was given.
    assert report["system"]["backend"]["name"] == "mine"
    assert report["options"]["backend"] == "mymod:Mine"
    assert "backend mine (mymod:Mine) " in run.result.stdout.str()  # the summary's
    convs = len([c for c in layer_cases() + SH_CASES if c.layer.type.name == "conv"])
    assert run.outcomes() == {"passed": convs + 1}
    layers = report["verification"]["layers"]
    assert len(layers) == convs and all(layer["verdict"] in PASSED for layer in layers)
    assert [n["verdict"] for n in report["verification"]["networks"]] == ["correct"]


def test_backend_module_that_fails_to_import_is_a_usage_error_saying_so(pytester, backends):
    result = pytester.runpytest("--gost-backend=badmod:Backend")

    usage_error(result, "module 'badmod' failed to import", "vendor library libfoo.so not found")


# A console script's interpreter: its own folder first on sys.path, not the working directory
# (``python -m pytest`` puts that there, and would hide what ``pytest`` does).
LAUNCHER = "import sys\nimport pytest\nsys.exit(pytest.console_main())\n"


def _plain_pytest(tmp_path, folder, *args: str):
    """``pytest ARGS`` in ``folder`` as its console script runs it, without PYTHONPATH."""
    launcher = tmp_path / "bin" / "pytest_script.py"
    launcher.parent.mkdir(exist_ok=True)
    launcher.write_text(LAUNCHER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [sys.executable, str(launcher), "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)


def test_a_backend_module_in_the_invocation_directory_loads_and_its_rerun_works_as_printed(
    tmp_path,
):
    folder = tmp_path / "vendor"
    folder.mkdir()
    (folder / "mymod.py").write_text(BACKENDS.read_text(encoding="utf-8"), "utf-8")
    args = ["--gost-backend=mymod:ScaledConv", *SMALL, "-k", "test_network"]
    done = _plain_pytest(tmp_path, folder, *args, "--junitxml=first.xml")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    (rerun,) = {
        line.partition("rerun: ")[2] for line in done.stdout.splitlines() if "rerun: " in line
    }
    argv = shlex.split(rerun)
    assert argv[0] == "pytest"
    again = _plain_pytest(tmp_path, folder, *argv[1:], "--junitxml=again.xml")
    assert again.returncode == 1, again.stdout[-2000:] + again.stderr[-2000:]
    for xml in ("first.xml", "again.xml"):
        cases = ElementTree.parse(folder / xml).getroot().iter("testcase")
        assert [c.get("name") for c in cases if c.find("failure") is not None] == [
            "test_network[Sh-inference-B1]"
        ]


def test_a_backend_module_in_the_rootdir_loads_from_a_folder_below_it(tmp_path):
    root = tmp_path / "project"
    (root / "jobs").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (root / "mymod.py").write_text(BACKENDS.read_text(encoding="utf-8"), "utf-8")
    done = _plain_pytest(tmp_path, root / "jobs", "--gost-backend=mymod:Mine", *SMALL, "--co")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_a_backend_module_found_nowhere_is_a_usage_error_saying_where_it_looked(pytester):
    result = pytester.runpytest("--gost-backend=nosuchmod:Backend")

    usage_error(result, "no module 'nosuchmod'", f"invocation directory {pytester.path}", "rootdir")


def test_backend_class_that_is_not_a_backend_is_a_usage_error_saying_so(pytester, backends):
    result = pytester.runpytest("--gost-backend=mymod:NotABackend")

    usage_error(result, "not a subclass of pytest_gostcnn.backend.Backend")


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("Nameless", "its class attribute name is ''; give Nameless a non-empty name"),
        ("Versionless", "its class attribute version is ''; give Versionless a non-empty version"),
    ],
)
def test_backend_with_an_empty_name_or_version_is_a_usage_error_naming_it(
    pytester, backends, name, says
):
    result = pytester.runpytest(f"--gost-backend=mymod:{name}")

    usage_error(result, f"--gost-backend: backend 'mymod:{name}': {says}")


def test_a_backend_option_the_backend_does_not_declare_is_a_usage_error_naming_it(pytester):
    result = pytester.runpytest(
        "--gost-backend=numpy", "--gost-backend-option", "device=cpu", "--gost-backend-option=x=1"
    )

    usage_error(
        result,
        "--gost-backend-option=device=cpu: backend 'numpy' has no option 'device'; "
        "it declares no option",
    )


def test_backend_module_without_the_class_is_a_usage_error_saying_so(pytester, backends):
    result = pytester.runpytest("--gost-backend=mymod:Missing")

    usage_error(result, "module 'mymod' has no 'Missing'")


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
    result = pytester.runpytest(f"--gost-backend={name}")

    usage_error(result, "available backends:")
    assert re.search(r"available backends: [a-z, ]*\bnumpy\b", result.stderr.str())


def test_unavailable_backend_has_every_item_skipped_with_its_reason(pytester, backends):
    run, report = verified_here(pytester, "--gost-backend=mymod:NoDevice", *SMALL)

    # Collected, then skipped; nothing was verified, so the run fails a CI gate.
    assert run.ret == pytest.ExitCode.TESTS_FAILED
    assert run.outcomes() == {"skipped": len(layer_cases()) + len(SH_CASES) + 2}
    reasons = run.longreprs("skipped").values()
    assert reasons and all("no CUDA device" in reason for reason in reasons)
    assert report["system"]["backend"]["unavailable"] == "no CUDA device"
    assert report["verification"] == {"layers": [], "networks": []}
    # ... and the summary says loudly that nothing was verified, so it passes for nothing.
    run.result.stdout.fnmatch_lines(
        [
            "gostcnn: NOTHING WAS VERIFIED: backend numpy (mymod:NoDevice) is unavailable "
            "(no CUDA device)*"
        ]
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
    # The plugin's own warning at the end of the run; [*] matches the option's literal *.
    result.stdout.fnmatch_lines([f"gostcnn: {says.replace('*', '[*]')}*"])


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
    result = pytester.runpytest(f"--gost-backend=mymod:{name}", *SMALL)

    usage_error(result, f"backend 'mymod:{name}': {says}")


def test_backend_system_facts_go_into_the_report_without_replacing_its_own(pytester, backends):
    run, report = verified(
        pytester, "--gost-backend=mymod:SystemSpoofs", *SMALL, "-k", "concat-forward-L3"
    )

    assert run.ret == pytest.ExitCode.OK
    backend = report["system"]["backend"]
    assert backend["driver"] == "1.2.3"
    assert backend["name"] == "numpy" and backend["device"] != "spoofed"


def test_report_header_says_the_threshold_was_overridden(pytester):
    line = header(pytester, "--gost-backend=numpy", *SMALL, "--gost-rmse-threshold=0.5")

    assert line.endswith("; СКОП OVERRIDDEN: --gost-rmse-threshold=0.5")


def test_report_header_says_why_a_backend_is_unavailable(pytester, backends):
    line = header(pytester, "--gost-backend=mymod:NoDevice", *SMALL)

    assert line.startswith("gostcnn: backend numpy (mymod:NoDevice) (unavailable: no CUDA device)")


def test_backend_whose_availability_check_raises_is_reported_not_a_crash(pytester, backends):
    run, report = verified_here(pytester, "--gost-backend=mymod:ProbeRaises", *SMALL)

    # Unavailable, so every item is skipped (and nothing verified): not an internal error.
    assert run.ret == pytest.ExitCode.TESTS_FAILED and run.internal_errors == []
    unavailable = report["system"]["backend"]["unavailable"]
    assert unavailable == "its availability check raised RuntimeError: cudaErrorNoDevice"
    reasons = run.longreprs("skipped").values()
    assert reasons and all("cudaErrorNoDevice" in reason for reason in reasons)


# A failed verification fails its item and the session goes on.


def test_backend_that_raises_fails_those_items_and_the_session_goes_on(pytester, backends):
    run, report = verified(
        pytester,
        "--gost-backend=mymod:RaisesOnRelu",
        *SMALL,
        "-k",
        "relu-forward-uniform or relu-forward-ties or concat-forward-L3",
    )

    # Two relu cases (uniform, ties) raise; concat, verified after them, still passes.
    assert run.outcomes() == {"failed": 2, "passed": 1}
    failures = [failure_message(text) for text in run.longreprs("failed").values()]
    raised = "the backend raised RuntimeError: relu kernel missing"
    assert len(failures) == 2 and all(raised in f["first failure"] for f in failures)
    *relus, concat = report["verification"]["layers"]
    assert [layer["subject"].split("-")[0] for layer in relus] == ["relu", "relu"]
    assert all(layer["verdict"] == "not correct" and raised in layer["error"] for layer in relus)
    assert concat["subject"].startswith("concat-forward-L3") and concat["verdict"] in PASSED


def test_backend_returning_nan_fails_the_verification_saying_nan(pytester, backends):
    run, report = verified(
        pytester, "--gost-backend=mymod:ReturnsNaN", *SMALL, "-k", "relu-forward-uniform"
    )

    assert run.outcomes() == {"failed": 1}
    (failure,) = run.longreprs("failed").values()
    assert "NaN" in failure_message(failure)["first failure"]
    (layer,) = report["verification"]["layers"]
    assert layer["verdict"] == "not correct"
    assert any("NaN" in (check["problem"] or "") for check in layer["checks"])


def test_backend_returning_the_wrong_dtype_fails_the_verification_saying_dtype(pytester, backends):
    run, report = verified(
        pytester, "--gost-backend=mymod:Float64", *SMALL, "-k", "relu-forward-uniform"
    )

    assert run.outcomes() == {"failed": 1}
    (failure,) = run.longreprs("failed").values()
    assert "dtype float64, expected float32" in failure_message(failure)["first failure"]
    (layer,) = report["verification"]["layers"]
    assert layer["verdict"] == "not correct"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Run:
    """One run of a backend whose convolutions are wrong, seed 7: a layer item and the
    network fail, and concat-forward passes beside them (in a fresh interpreter)."""
    return suite(
        directory(tmp_path_factory.mktemp("seeded")),
        "--gost-backend=mymod:ScaledConv",
        *SMALL,
        "--gost-seed=7",
        "-k",
        "conv-forward-k3s2p1 or test_network or concat-forward-L3",
    )


@pytest.mark.parametrize("selected", ["conv-forward-k3s2p1", "test_network"])
def test_failure_prints_seed_and_a_rerun_command_that_reproduces_it(seeded, selected):
    # concat-forward passes and the other failure is selected too: the rerun must narrow to
    # the failing item it was printed for.
    run, report = seeded, seeded.report
    assert outcomes(run.reports) == {"failed": 2, "passed": 1}
    ((failed, longrepr),) = [
        (n, text) for n, text in run.longreprs("failed").items() if selected in n
    ]
    message = failure_message(longrepr)
    assert message["seed"] == "--gost-seed=7"
    argv = shlex.split(message["rerun"])
    assert argv[:2] == ["pytest", "--gost-backend=mymod:ScaledConv"]

    again = suite(run.path, *argv[1:])

    assert outcomes(again.reports) == {"failed": 1}
    ((again_failed, again_longrepr),) = again.longreprs("failed").items()
    assert again_failed == failed
    # The same СКО to the last digit: the same seed drew the same data.
    assert failure_message(again_longrepr)["first failure"] == message["first failure"]
    verifications = report["verification"]["layers"] + report["verification"]["networks"]
    failing = [v for v in verifications if v["verdict"] == "not correct"]
    (again_failing,) = (
        again.report["verification"]["layers"] + again.report["verification"]["networks"]
    )
    assert len(failing) == 2 and again_failing in failing


def test_a_failure_on_a_nodes_cell_k_reruns_on_that_cells_device(pytester, backends):
    # Under mpirun, local rank k builds its backend as cell k (its device); one process
    # does the same with --gost-local-cell=k, and the rerun command of its failure keeps it.
    selected = ("--gost-backend=mymod:ScaledConvOnCell3", *SMALL, "-k", "test_network")
    assert as_user(pytester, *selected).outcomes() == {"passed": 1}  # cell 0's device is fine

    run, report = verified(pytester, *selected, "--gost-local-cell=3")

    assert run.outcomes() == {"failed": 1}
    assert report["options"]["local_cell"] == 3
    (failure,) = run.longreprs("failed").values()
    argv = shlex.split(failure_message(failure)["rerun"])
    assert "--gost-local-cell=3" in argv
    assert as_user(pytester, *argv[1:]).outcomes() == {"failed": 1}


def test_summary_gives_a_failed_networks_first_failed_array_and_rerun_command(pytester, backends):
    run, report = verified(
        pytester, "--gost-backend=mymod:ScaledConv", *SMALL, "-k", "test_network"
    )

    (network,) = report["verification"]["networks"]
    assert network["verdict"] == "not correct"
    assert [check["array"] for check in network["checks"]][:1] == ["output"]
    # The summary's layout: the table's row, then the network's first failure and rerun.
    run.result.stdout.fnmatch_lines(
        [
            f"*{SUMMARY_HEADER}*",
            "backend numpy (mymod:ScaledConv) * on CPU*; dtype float32; batch 1; seed 0; "
            "weights scaled",
            "network *mode *verdict *worst СКО/СКОП *array",
            "Ш (Sh)   inference  not correct *",
            "Ш (Sh) inference: output: СКО *",
            "  rerun: pytest --gost-backend=mymod:ScaledConv *",
        ],
        consecutive=True,
    )


# The RMSE threshold override.


@pytest.fixture(scope="module")
def zero_threshold(tmp_path_factory) -> Run:
    """A convolution and a concatenation verified under a СКОП of 0 (a fresh interpreter)."""
    return suite(
        directory(tmp_path_factory.mktemp("zero")),
        "--gost-backend=numpy",
        *SMALL,
        "--gost-rmse-threshold=0",
        "-k",
        "conv-forward-k3s2p1 or concat-forward-L3",
    )


def _layer(report: dict, subject: str) -> dict:
    (layer,) = [v for v in report["verification"]["layers"] if v["subject"].startswith(subject)]
    return layer


def test_zero_threshold_fails_a_float32_layer_with_rounding(zero_threshold):
    run = zero_threshold

    # A float32 convolution rounds its sums, so its СКО > 0 = СКОП: not reference-grade.
    assert outcomes(run.reports) == {"failed": 1, "passed": 1}
    ((name, failure),) = run.longreprs("failed").items()
    assert "conv-forward-k3s2p1" in name
    assert "СКОП 0.000e+00" in failure_message(failure)["first failure"]
    layer = _layer(run.report, "conv-forward-k3s2p1")
    assert layer["verdict"] == "not correct"
    assert all(c["admissible_rmse"] == 0 and c["rmse"] > 0 for c in layer["checks"])


def test_zero_threshold_passes_a_copy_only_layer_as_reference_grade(zero_threshold):
    run = zero_threshold

    # Concatenation copies values: with the same inputs its СКО is 0, which passes only
    # as reference-grade, since no СКО is below a СКОП of 0.
    assert outcomes(run.reports) == {"failed": 1, "passed": 1}
    (name,) = [r["nodeid"] for r in run.reports if r["when"] == "call" and r["outcome"] == "passed"]
    assert "concat-forward-L3" in name
    layer = _layer(run.report, "concat-forward-L3")
    assert layer["verdict"] == "reference-grade"
    assert all(c["rmse"] == 0 and c["admissible_rmse"] == 0 for c in layer["checks"])
