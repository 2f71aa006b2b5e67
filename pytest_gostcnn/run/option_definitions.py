"""The ``--gost-*`` options, declared once: each with its help and its own parser.

``OPTIONS`` generates the plugin's ``addoption`` calls, the arguments of
``python -m pytest_gostcnn`` that mean the same, and the options of a rerun command;
each value's parser is in ``option_parsers.py``. Nothing here imports pytest.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_gostcnn.model.data import WEIGHT_READINGS
from pytest_gostcnn.model.dtypes import INFERENCE_DTYPES, TRAINING_DTYPES
from pytest_gostcnn.performance.plan import PROFILES, QUICK_IMAGES
from pytest_gostcnn.performance.stall import (
    STALL_DEFAULT_SECONDS,
    STALL_FACTOR,
    STALL_FLOOR_SECONDS,
)

from . import option_parsers as parse

MODES = ("training", "inference", "both")
MAX_BATCH = 1024  # standard.md §7: B is an integer from 1 to 1024
MAX_IMAGES = 10**9  # a thousand times section 9.3's 10^6; more would run for years


@dataclass(frozen=True)
class Option:
    """One ``--gost-NAME`` option: its parser, its default text, and how a rerun repeats it.

    ``rerun``: "always" repeats the value, "changed" only when it is not the default,
    "never" leaves it out (the report and the peak do not change what is verified).
    ``command``: the option is also ``--NAME`` of ``python -m pytest_gostcnn``.
    ``switch``: given without a value on the command line (``true`` in the ini file).
    ``repeat``: given any number of times on the command line (its texts come as a list; in
    the ini file, one text of them separated by white space), repeated so by a rerun.
    Every option is also the ini-file setting ``gost_NAME``; the command line wins.
    """

    name: str
    metavar: str
    help: str
    parse: Callable[[str, str], Any]
    default: str | None = None
    rerun: str = "changed"
    command: bool = False
    switch: bool = False
    repeat: bool = False

    @property
    def flag(self) -> str:
        return "--gost-" + self.name.replace("_", "-")

    @property
    def dest(self) -> str:
        """The option's name in pytest's namespace, and its setting in the ini file."""
        return "gost_" + self.name

    def value(self, text: str | list[str] | None, flag: str | None = None) -> Any:
        """The parsed value of ``text`` (the default when None); ValueError naming the flag."""
        text = self.default if text is None else text
        return None if text is None else self.parse(flag or self.flag, text)

    def add_argument(self, parser: argparse.ArgumentParser, flag: str | None = None) -> None:
        """This option as ``--NAME`` (or ``flag``) of an argparse command, checked by the
        same parser."""
        flag = flag or "--" + self.name.replace("_", "-")

        def check(text: str) -> Any:
            try:
                return self.parse(flag, text)
            except ValueError as exc:  # argparse names the option itself
                raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{flag}=")) from None

        default = None if self.default is None else self.parse(flag, self.default)
        parser.add_argument(flag, metavar=self.metavar, type=check, default=default, help=self.help)


OPTIONS: tuple[Option, ...] = (
    Option(
        "backend",
        "NAME",
        "backend to verify: a registered name (numpy, ...), package.module:Class, or "
        "FOLDER::module:Class (the module loaded from FOLDER under a name of its own). "
        "Given without test paths, runs the suite shipped with the plugin, which runs only "
        "then or when its path is given (its backend then numpy by default).",
        parse.any_text,
        default="numpy",
        rerun="always",
    ),
    Option(
        "dtype",
        "TYPE",
        f"data type: one of {', '.join(INFERENCE_DTYPES)} that the backend declares; training "
        f"only {', '.join(TRAINING_DTYPES)} (default float32); int8 and int16 verify inference "
        "under the fixed-point model of docs/standard.md §6",
        parse.dtype,
        default="float32",
        rerun="always",
    ),
    Option(
        "batch",
        "B",
        f"batch size B, 1..{MAX_BATCH} (section 9.8; default 2)",
        parse.integer_range(1, MAX_BATCH),
        default="2",
        rerun="always",
        command=True,
    ),
    Option(
        "mode",
        "MODE",
        "training, inference or both (default both)",
        parse.choice(MODES),
        default="both",
    ),
    Option(
        "networks",
        "LIST",
        "comma-separated networks by letter (M G V S R Sh, or М Г В С Р Ш) or name (default all)",
        parse.networks,
        command=True,
    ),
    Option(
        "seed",
        "N",
        "seed of every random draw (default 0)",
        parse.integer_range(0, 2**63 - 1),
        default="0",
        rerun="always",
        command=True,
    ),
    Option(
        "tables",
        "TABLES",
        "network tables: a shipped set, reconstructions (default) or canonical (the widely "
        "used networks at full size; never compliant), or a directory of YAML tables "
        "(./canonical for a directory of that name)",
        parse.any_text,
        command=True,
    ),
    Option(
        "weights",
        "READING",
        "how section 8 draws a network's weights: scaled (default; each layer's from "
        "U(-a, a), a = min(1, sqrt(6 / fan-in)), biases from U(-1, 1), so every term stays "
        "visible at any depth) or full-range (every weight from U(-1, 1))",
        parse.choice(WEIGHT_READINGS),
        default="scaled",
        command=True,
    ),
    Option(
        "rmse_threshold",
        "SHARE",
        "override СКОП: the admissible RMSE of every array as a share of the reference "
        "array's RMS (0 admits only reference-grade results)",
        parse.threshold,
    ),
    Option(
        "profile",
        "PROFILE",
        f"benchmark profile: quick (at least {QUICK_IMAGES} images and 3 rounds of B per "
        "test, not compliant; default) or full (1,000,000 images per cell, as section 9.3 "
        "requires)",
        parse.choice(PROFILES),
        default="quick",
    ),
    Option(
        "images",
        "N",
        "images per test per cell, at least the batch B, instead of a profile (give one of "
        "the two): ceil(N / B) rounds of B; compliant only from 1,000,000 (section 9.3)",
        parse.integer_range(1, MAX_IMAGES),
    ),
    Option(
        "peak",
        "MAC/s",
        "theoretical peak of one computing cell in the chosen data type, e.g. 2.5e12 or "
        "2.5T (default: estimated from the device, and labelled so)",
        parse.peak,
        rerun="never",
    ),
    Option(
        "report",
        "PATH",
        "write a JSON report (system, options, verdicts, timings, ОРП, evaluation)",
        parse.report_path,
        rerun="never",
    ),
    Option(
        "resume",
        "PATH",
        "continue a stopped run from its --gost-report: the same configuration is required "
        "(every difference is listed); its finished tests are not timed again, section 8 is "
        "verified again; give --gost-report too to keep the continued run",
        parse.readable_file,
        rerun="never",
    ),
    Option(
        "compare",
        "BASELINE",
        "print each test's ОРП against a baseline --gost-report's, with the change and the "
        "median round's slowdown; the baseline must pass check and be of this configuration "
        "(every difference is listed), the backend's version aside",
        parse.readable_file,
        rerun="never",
    ),
    Option(
        "compare_fail",
        "PERCENT",
        "fail a test, and exit 6, when it is more than PERCENT slower than the baseline, "
        "significantly: with --gost-versus, its paired rounds' centre (Wilcoxon signed-rank, "
        "Holm across the run's tests, 5 per cent); with --gost-compare, the median round at "
        "95 per cent confidence (a bootstrap of both runs' rounds)",
        parse.percent,
        rerun="never",
    ),
    Option(
        "versus",
        "BACKEND",
        "time every selected benchmark test on this baseline backend too, on the same "
        "images, the two backends' rounds alternating in pairs of drawn order, and print "
        "the candidate's slowdown against it: a registered name, package.module:Class, or "
        "FOLDER::module:Class (loaded from FOLDER under a name of its own); it is verified "
        "and checked as the candidate is (docs/benchmarking.md, The paired gate)",
        parse.any_text,
        rerun="always",
    ),
    Option(
        "local_cell",
        "K",
        "run one process as the K-th computing cell of a node, on the device that cell "
        "uses (e.g. GPU K); a failure on cell K of an MPI run gives it in its rerun command "
        "(default: the MPI local rank, 0 without MPI)",
        parse.integer_range(0, 2**31 - 1),
    ),
    Option(
        "stall_timeout",
        "SECONDS",
        "with several cells: how long the cells wait at a benchmark round's barrier for one "
        "that has not arrived before the job is ended, naming it (default "
        f"{STALL_DEFAULT_SECONDS:g} s until the warm-up round is timed, then "
        f"{STALL_FACTOR} x that round, at least {STALL_FLOOR_SECONDS:g} s)",
        parse.seconds,
        rerun="never",
    ),
    Option(
        "reference",
        "LIBRARY[:DEVICE]",
        "the array library the float64 reference of verification and checks runs on: numpy "
        "(default), torch (PyTorch on the CPU, its GEMM multithreaded), torch:cuda:0, cupy "
        "or cupy:cuda:N; checked against NumPy on fixed items before the run relies on it, "
        "the report says which ran and the agreement found (docs/verification.md)",
        parse.reference_library,
        default="numpy",
    ),
    Option(
        "reference_memory",
        "BYTES",
        "the memory the suite's float64 reference (with its error model) may take (2GB, "
        "750MB), on the device --gost-reference names, with the results a network item "
        "keeps whole beside it: it runs over the batch a slice of its images at a time to "
        "stay within it, at any B; a bound too small for one image "
        "is refused, naming the smallest that works (default 2GB, or an image a slice where "
        "a network needs more; docs/performance.md)",
        parse.memory_size,
        command=True,
    ),
    Option(
        "allow_unavailable",
        "",
        "exit 0 when the backend is unavailable on this machine (a CI matrix job without the "
        "device); otherwise a run that verified nothing exits non-zero",
        parse.switch,
        default="false",
        rerun="never",
        switch=True,
    ),
    Option(
        "backend_option",
        "KEY=VALUE",
        "a setting the backend declares, e.g. device=cuda:1 for torch; repeat it for several "
        "(an unknown key is refused, naming the backend's keys); the report records them",
        parse.key_values,
        default="",
        repeat=True,
    ),
)
BY_NAME = {option.name: option for option in OPTIONS}
# A rerun command names what it runs first, then what narrows it.
RERUN_ORDER = (
    "backend",
    "backend_option",
    "versus",
    "dtype",
    "batch",
    "seed",
    "tables",
    "weights",
    "rmse_threshold",
    "reference",
    "reference_memory",
    "profile",
    "images",
    "networks",
    "mode",
    "local_cell",
    "stall_timeout",
    "peak",
    "report",
    "resume",
    "compare",
    "compare_fail",
    "allow_unavailable",
)
