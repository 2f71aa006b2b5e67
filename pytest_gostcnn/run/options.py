"""The ``--gost-*`` options, declared once: each with its help and its own parser.

``OPTIONS`` generates the plugin's ``addoption`` calls, the arguments of
``python -m pytest_gostcnn`` that mean the same, and the options of a rerun command.
``Options.parse`` turns their texts into one frozen object; nothing here imports pytest.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import shlex
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gostcnn.machine.peak import Peak, parse_peak
from pytest_gostcnn.model.data import WEIGHT_READINGS
from pytest_gostcnn.model.dtypes import INFERENCE_DTYPES, TRAINING_DTYPES
from pytest_gostcnn.model.network import CYRILLIC, LATIN, Network, network_key
from pytest_gostcnn.performance.plan import PROFILES, QUICK_IMAGES
from pytest_gostcnn.performance.stall import (
    STALL_DEFAULT_SECONDS,
    STALL_FACTOR,
    STALL_FLOOR_SECONDS,
)

MODES = ("training", "inference", "both")
MAX_BATCH = 1024  # standard.md §7: B is an integer from 1 to 1024
REPORT_TEMPORARY_PREFIX = ".gost-report."  # short: a long report name must still fit beside it


def integer(flag: str, text: str, low: int, high: int) -> int:
    """``text`` as an integer from ``low`` to ``high``; ValueError naming ``flag``."""
    if not re.fullmatch(r"\s*[+-]?[0-9]+\s*", text):  # int() would take "1_0" and "٣"
        raise ValueError(f"{flag}={text}: not an integer")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{flag}={value}: must be an integer from {low} to {high}")
    return value


def _integer(low: int, high: int) -> Callable[[str, str], int]:
    return lambda flag, text: integer(flag, text, low, high)


def _choice(choices: tuple[str, ...]) -> Callable[[str, str], str]:
    def parse(flag: str, text: str) -> str:
        if text not in choices:
            raise ValueError(f"{flag}={text}: choose one of {', '.join(choices)}")
        return text

    return parse


def _dtype(flag: str, text: str) -> str:
    if text not in INFERENCE_DTYPES:
        hint = f"; did you mean {text.lower()}?" if text.lower() in INFERENCE_DTYPES else ""
        raise ValueError(
            f"{flag}={text}: not a data type of the standard "
            f"(section 11: {', '.join(INFERENCE_DTYPES)}){hint}"
        )
    return text


def _threshold(flag: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{flag}={text}: not a number") from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{flag}={text}: must be a finite number >= 0")
    return value


def _seconds(flag: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{flag}={text}: not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{flag}={text}: must be a finite number of seconds > 0")
    return value


def _percent(flag: str, text: str) -> float:
    """A share in percent, 0 to 100, with or without its ``%``."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise ValueError(f"{flag}={text}: not a number of percent") from None
    if not (math.isfinite(value) and 0 <= value <= 100):
        raise ValueError(f"{flag}={text}: must be a number of percent from 0 to 100")
    return value


def _text(flag: str, text: str) -> str:
    return text


def _networks(flag: str, text: str) -> str:
    """A list of networks; an empty one (an unset CI variable, say) is not "all six"."""
    if not text.replace(",", "").strip():
        raise ValueError(
            f"{flag}={text}: names no network; give some (M G V S R Sh, or М Г В С Р Ш) "
            "or leave the option out for all of them"
        )
    return text


BACKEND_OPTION_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


def _key_values(flag: str, texts: str | list[str]) -> tuple[tuple[str, str], ...]:
    """``KEY=VALUE`` settings, in the order given: a list (the flag given several times) or
    one text of them separated by white space (the ini setting). A key given twice, or a
    setting without ``=`` or with a malformed key, is an error naming it."""
    items = texts.split() if isinstance(texts, str) else list(texts)
    pairs: dict[str, str] = {}
    for item in items:
        key, equals, value = item.partition("=")
        if not equals:
            raise ValueError(f"{flag}={item}: give KEY=VALUE")
        if not BACKEND_OPTION_KEY.fullmatch(key):
            raise ValueError(
                f"{flag}={item}: the key {key!r} is not a name (letters, digits, _ . -, "
                "starting with a letter or _)"
            )
        if key in pairs:
            raise ValueError(f"{flag}={item}: {key} is given twice ({key}={pairs[key]} before)")
        pairs[key] = value
    return tuple(pairs.items())


def _switch(flag: str, text: str) -> bool:
    """A switch: given on the command line it is "true"; in the ini file true or false."""
    words = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
    if text.strip().lower() not in words:
        raise ValueError(f"{flag}={text}: give true or false")
    return words[text.strip().lower()]


def _peak(flag: str, text: str) -> Peak:
    try:
        return parse_peak(text)
    except ValueError as exc:  # it names --gost-peak; the value may come from the ini file
        raise ValueError(str(exc).replace("--gost-peak", flag, 1)) from None


def _report_path(flag: str, path: str) -> str:
    """The report's path with ``~`` expanded, once it is clear a file can be written there
    (checked now, not after a run of hours)."""
    if not path.strip():
        raise ValueError(f"{flag}=: empty; give a file name")
    try:
        given = Path(path).expanduser()
        is_dir = given.is_dir()
        target = given.resolve()  # a symbolic link: the file it points to
        folder_exists = target.parent.is_dir()
        special = target.exists() and not target.is_file()
    except (OSError, RuntimeError) as exc:  # ~nouser, a name too long, a link loop
        raise ValueError(f"{flag}={path}: {exc}") from None
    folder = target.parent
    if path.endswith(("/", os.sep)) or is_dir:
        raise ValueError(f"{flag}={path}: is a directory; give a file name")
    if not folder_exists:
        raise ValueError(f"{flag}={path}: the folder {folder} does not exist")
    if special:
        raise ValueError(f"{flag}={path}: exists and is not a regular file")
    try:  # the report is written as a temporary file in that folder, then renamed
        handle, probe = tempfile.mkstemp(prefix=REPORT_TEMPORARY_PREFIX, dir=folder)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(
            f"{flag}={path}: cannot write in {folder}: {exc.strerror or exc}"
        ) from None
    return str(target)


def _readable_file(flag: str, path: str) -> str:
    """A file that exists and can be read, with ``~`` expanded (its content is checked when
    the session starts)."""
    if not path.strip():
        raise ValueError(f"{flag}=: empty; give a file name")
    try:
        target = Path(path).expanduser().resolve()
        exists, regular = target.exists(), target.is_file()
    except (OSError, RuntimeError) as exc:
        raise ValueError(f"{flag}={path}: {exc}") from None
    if not exists:
        raise ValueError(f"{flag}={path}: no such file")
    if not regular:
        raise ValueError(f"{flag}={path}: not a regular file")
    if not os.access(target, os.R_OK):
        raise ValueError(f"{flag}={path}: cannot be read (permissions)")
    return str(target)


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
        "backend to verify: a registered name (numpy, ...) or package.module:Class. "
        "Given without test paths, runs the suite shipped with the plugin, which runs only "
        "then or when its path is given (its backend then numpy by default).",
        _text,
        default="numpy",
        rerun="always",
    ),
    Option(
        "dtype",
        "TYPE",
        f"data type: one of {', '.join(INFERENCE_DTYPES)} that the backend declares; training "
        f"only {', '.join(TRAINING_DTYPES)} (default float32); int8 and int16 verify inference "
        "under the fixed-point model of docs/standard.md §6",
        _dtype,
        default="float32",
        rerun="always",
    ),
    Option(
        "batch",
        "B",
        f"batch size B, 1..{MAX_BATCH} (section 9.8; default 2)",
        _integer(1, MAX_BATCH),
        default="2",
        rerun="always",
        command=True,
    ),
    Option("mode", "MODE", "training, inference or both (default both)", _choice(MODES), "both"),
    Option(
        "networks",
        "LIST",
        "comma-separated networks by letter (M G V S R Sh, or М Г В С Р Ш) or name (default all)",
        _networks,
        command=True,
    ),
    Option(
        "seed",
        "N",
        "seed of every random draw (default 0)",
        _integer(0, 2**63 - 1),
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
        _text,
        command=True,
    ),
    Option(
        "weights",
        "READING",
        "how section 8 draws a network's weights: scaled (default; each layer's from "
        "U(-a, a), a = min(1, sqrt(6 / fan-in)), biases from U(-1, 1), so every term stays "
        "visible at any depth) or full-range (every weight from U(-1, 1))",
        _choice(WEIGHT_READINGS),
        default="scaled",
        command=True,
    ),
    Option(
        "rmse_threshold",
        "SHARE",
        "override СКОП: the admissible RMSE of every array as a share of the reference "
        "array's RMS (0 admits only reference-grade results)",
        _threshold,
    ),
    Option(
        "profile",
        "PROFILE",
        f"benchmark profile: quick (at least {QUICK_IMAGES} images and 3 rounds of B per "
        "test, not compliant; default) or full (1,000,000 images per cell, as section 9.3 "
        "requires)",
        _choice(PROFILES),
        default="quick",
    ),
    Option(
        "images",
        "N",
        "images per test per cell, at least the batch B, instead of a profile (give one of "
        "the two): ceil(N / B) rounds of B; compliant only from 1,000,000 (section 9.3)",
        _integer(1, 2**63 - 1),
    ),
    Option(
        "peak",
        "MAC/s",
        "theoretical peak of one computing cell in the chosen data type, e.g. 2.5e12 or "
        "2.5T (default: estimated from the device, and labelled so)",
        _peak,
        rerun="never",
    ),
    Option(
        "report",
        "PATH",
        "write a JSON report (system, options, verdicts, timings, ОРП, evaluation)",
        _report_path,
        rerun="never",
    ),
    Option(
        "resume",
        "PATH",
        "continue a stopped run from its --gost-report: the same configuration is required "
        "(every difference is listed); its finished tests are not timed again, section 8 is "
        "verified again; give --gost-report too to keep the continued run",
        _readable_file,
        rerun="never",
    ),
    Option(
        "compare",
        "BASELINE",
        "print each test's ОРП against a baseline --gost-report's, with the change and both "
        "runs' spread; the baseline must pass check and be of this configuration (every "
        "difference is listed), the backend's version aside",
        _readable_file,
        rerun="never",
    ),
    Option(
        "compare_fail",
        "PERCENT",
        "exit 6 when a test's ОРП falls more than PERCENT below the baseline's "
        "(--gost-compare), beyond the larger of the two runs' spread (the mean round's excess "
        "over the median)",
        _percent,
        rerun="never",
    ),
    Option(
        "local_cell",
        "K",
        "run one process as the K-th computing cell of a node, on the device that cell "
        "uses (e.g. GPU K); a failure on cell K of an MPI run gives it in its rerun command "
        "(default: the MPI local rank, 0 without MPI)",
        _integer(0, 2**31 - 1),
    ),
    Option(
        "stall_timeout",
        "SECONDS",
        "with several cells: how long the cells wait at a benchmark round's barrier for one "
        "that has not arrived before the job is ended, naming it (default "
        f"{STALL_DEFAULT_SECONDS:g} s until the warm-up round is timed, then "
        f"{STALL_FACTOR} x that round, at least {STALL_FLOOR_SECONDS:g} s)",
        _seconds,
        rerun="never",
    ),
    Option(
        "allow_unavailable",
        "",
        "exit 0 when the backend is unavailable on this machine (a CI matrix job without the "
        "device); otherwise a run that verified nothing exits non-zero",
        _switch,
        default="false",
        rerun="never",
        switch=True,
    ),
    Option(
        "backend_option",
        "KEY=VALUE",
        "a setting the backend declares, e.g. device=cuda:1 for torch; repeat it for several "
        "(an unknown key is refused, naming the backend's keys); the report records them",
        _key_values,
        default="",
        repeat=True,
    ),
)
BY_NAME = {option.name: option for option in OPTIONS}
# A rerun command names what it runs first, then what narrows it.
RERUN_ORDER = (
    "backend",
    "backend_option",
    "dtype",
    "batch",
    "seed",
    "tables",
    "weights",
    "rmse_threshold",
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


@dataclass(frozen=True)
class Options:
    """What the ``--gost-*`` options say, each parsed and checked on its own.

    What depends on more than one option or on the machine (a data type the backend
    declares, a network the tables hold, the MPI local rank) is checked when the session
    starts (``run/resolution.py``). ``given`` names the options given on the command line or
    in the ini file.
    """

    backend: str
    dtype: str
    batch: int
    mode: str
    networks: str | None
    seed: int
    tables: str | None
    weights: str
    rmse_threshold: float | None
    profile: str
    images: int | None
    peak: Peak | None
    report: str | None
    local_cell: int | None
    resume: str | None = None
    compare: str | None = None
    compare_fail: float | None = None
    stall_timeout: float | None = None
    allow_unavailable: bool = False
    backend_option: tuple[tuple[str, str], ...] = ()  # KEY=VALUE pairs, in the order given
    given: frozenset[str] = frozenset()

    @classmethod
    def parse(
        cls, texts: Mapping[str, str | list[str] | None], flags: Mapping[str, str] | None = None
    ) -> Options:
        """The options from their texts by name (None: not given); ValueError naming one
        by its flag, or by ``flags[name]`` (the ini setting a text came from)."""
        flags = flags or {}
        values = {
            option.name: option.value(texts.get(option.name), flags.get(option.name))
            for option in OPTIONS
        }
        given = frozenset(name for name in BY_NAME if texts.get(name) is not None)
        return cls(**values, given=given)

    @property
    def backend_options(self) -> dict[str, str]:
        """``--gost-backend-option`` as a mapping, key to value."""
        return dict(self.backend_option)

    @property
    def modes(self) -> tuple[str, ...]:
        return ("training", "inference") if self.mode == "both" else (self.mode,)

    def args(self, **changes: Any) -> list[str]:
        """The ``--gost-*`` arguments that reproduce these options, with ``changes``."""
        options = dataclasses.replace(self, **changes)
        args = []
        for option in sorted(OPTIONS, key=lambda o: RERUN_ORDER.index(o.name)):
            value = getattr(options, option.name)
            if option.rerun == "never" or value is None or value == "":
                continue
            if option.rerun == "changed" and option.default is not None:
                if value == option.value(None):
                    continue
            if option.repeat:
                args.extend(f"{option.flag}={key}={text}" for key, text in value)
                continue
            args.append(f"{option.flag}={value}")
        return args

    def rerun(self, keyword: str, **changes: Any) -> str:
        return shlex.join(["pytest", *self.args(**changes), "-k", keyword])


def select_networks(
    networks: dict[str, Network],
    spec: str | None,
    option: str = "--gost-networks",
    tables_option: str = "--gost-tables",
) -> dict[str, Network]:
    """The networks ``spec`` names (letters, Latin or Cyrillic, or a name's start), in the
    standard's order; all of them when ``spec`` is None."""
    if spec is None:
        return networks
    chosen: dict[str, Network] = {}
    for token in (t.strip() for t in spec.split(",")):
        if not token:
            continue
        try:
            latin = network_key(token)
        except KeyError:
            by_name = [n for n in networks.values() if n.name.lower().startswith(token.lower())]
            if len(by_name) != 1:
                known = ", ".join(f"{n.latin} ({n.letter}, {n.name})" for n in networks.values())
                raise ValueError(f"{option}: unknown network {token!r}; known: {known}") from None
            latin = by_name[0].latin
        if latin not in networks:
            raise ValueError(
                f"{option}: network {latin} ({CYRILLIC[latin]}) has no table in {tables_option}"
            )
        chosen[latin] = networks[latin]
    if not chosen:
        raise ValueError(f"{option}={spec}: no network named")
    return {latin: chosen[latin] for latin in LATIN.values() if latin in chosen}
