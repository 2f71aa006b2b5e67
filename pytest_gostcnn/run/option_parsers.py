"""The parser of each ``--gost-*`` option's value: ``parse(flag, text)`` returns the value
or raises a ValueError naming ``flag`` (the command-line flag or the ini setting)."""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from pytest_gostcnn.machine.peak import Peak, parse_peak
from pytest_gostcnn.model import memory
from pytest_gostcnn.model.dtypes import INFERENCE_DTYPES
from pytest_gostcnn.reference import library

REPORT_TEMPORARY_PREFIX = ".gost-report."  # short: a long report name must still fit beside it


def integer(flag: str, text: str, low: int, high: int) -> int:
    """``text`` as an integer from ``low`` to ``high``; ValueError naming ``flag``."""
    if not re.fullmatch(r"\s*[+-]?[0-9]+\s*", text):  # int() would take "1_0" and "٣"
        raise ValueError(f"{flag}={text}: not an integer")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{flag}={value}: must be an integer from {low} to {high}")
    return value


def integer_range(low: int, high: int) -> Callable[[str, str], int]:
    return lambda flag, text: integer(flag, text, low, high)


def choice(choices: tuple[str, ...]) -> Callable[[str, str], str]:
    def parse(flag: str, text: str) -> str:
        if text not in choices:
            raise ValueError(f"{flag}={text}: choose one of {', '.join(choices)}")
        return text

    return parse


def dtype(flag: str, text: str) -> str:
    if text not in INFERENCE_DTYPES:
        hint = f"; did you mean {text.lower()}?" if text.lower() in INFERENCE_DTYPES else ""
        raise ValueError(
            f"{flag}={text}: not a data type of the standard "
            f"(section 11: {', '.join(INFERENCE_DTYPES)}){hint}"
        )
    return text


def threshold(flag: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{flag}={text}: not a number") from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{flag}={text}: must be a finite number >= 0")
    return value


def seconds(flag: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{flag}={text}: not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{flag}={text}: must be a finite number of seconds > 0")
    return value


def percent(flag: str, text: str) -> float:
    """A share in percent, 0 to 100, with or without its ``%``."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise ValueError(f"{flag}={text}: not a number of percent") from None
    if not (math.isfinite(value) and 0 <= value <= 100):
        raise ValueError(f"{flag}={text}: must be a number of percent from 0 to 100")
    return value


def any_text(flag: str, text: str) -> str:
    return text


def networks(flag: str, text: str) -> str:
    """A list of networks; an empty one (an unset CI variable, say) is not "all six"."""
    if not text.replace(",", "").strip():
        raise ValueError(
            f"{flag}={text}: names no network; give some (M G V S R Sh, or М Г В С Р Ш) "
            "or leave the option out for all of them"
        )
    return text


BACKEND_OPTION_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


def key_values(flag: str, texts: str | list[str]) -> tuple[tuple[str, str], ...]:
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


def reference_library(flag: str, text: str) -> library.ReferenceLibrary:
    """``LIBRARY[:DEVICE]``: the array library (and device) the float64 reference runs on."""
    try:
        return library.parse(text)
    except ValueError as exc:
        raise ValueError(f"{flag}={exc}") from None


def memory_size(flag: str, text: str) -> int:
    """A number of bytes: ``2GB``, ``750MB``, ``64KB`` or plain bytes."""
    try:
        return memory.parse_size(text)
    except ValueError as exc:
        raise ValueError(f"{flag}={exc}") from None


def switch(flag: str, text: str) -> bool:
    """A switch: given on the command line it is "true"; in the ini file true or false."""
    words = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
    if text.strip().lower() not in words:
        raise ValueError(f"{flag}={text}: give true or false")
    return words[text.strip().lower()]


def peak(flag: str, text: str) -> Peak:
    try:
        return parse_peak(text)
    except ValueError as exc:  # it names --gost-peak; the value may come from the ini file
        raise ValueError(str(exc).replace("--gost-peak", flag, 1)) from None


def report_path(flag: str, path: str) -> str:
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
        missing = "is a file, not a folder" if folder.exists() else "does not exist"
        raise ValueError(f"{flag}={path}: the folder {folder} {missing}")
    if special:
        raise ValueError(f"{flag}={path}: exists and is not a regular file")
    if target.exists() and not _writable(target):  # a report its owner protected
        raise ValueError(f"{flag}={path}: the file is read-only; give another name")
    try:  # the report is written as a temporary file in that folder, then renamed
        handle, probe = tempfile.mkstemp(prefix=REPORT_TEMPORARY_PREFIX, dir=folder)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(
            f"{flag}={path}: cannot write in {folder}: {exc.strerror or exc}"
        ) from None
    return str(target)


def _writable(path: Path) -> bool:
    """Whether ``path`` may be written: root may write any file, so a file with no write
    permission bit is read-only to it too (chmod a-w), as to everyone else."""
    return os.access(path, os.W_OK) and bool(path.stat().st_mode & 0o222)


def readable_file(flag: str, path: str) -> str:
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
