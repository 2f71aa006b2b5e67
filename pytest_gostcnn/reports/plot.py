"""``python -m pytest_gostcnn plot REPORT -o FILE.svg``: a written report's evaluation as
a picture (section 9.8).

The command draws a report only when it is whole by its schema and every figure in it agrees
(``check``), and writes the picture atomically; the picture itself is ``picture.draw``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .check import first_disagreement
from .files import write_atomically
from .load import ReportError, read_report
from .picture import draw
from .schema import validate


class PictureError(Exception):
    """A picture that cannot be written where ``-o`` says; the message names the file."""


def plot(report_path: str, output_path: str, tables: str | None = None) -> int:
    """The command: read ``report_path``, write its picture to ``output_path``; on a
    problem, one line on stderr and exit status 1. ``tables``: the directory of a
    ``--gost-tables=DIR`` run, to check its report against."""
    try:
        report = drawable_report(Path(report_path), tables)
        write_picture(Path(report_path), Path(output_path), draw(report))
    except (ReportError, PictureError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {output_path}")
    return 0


def drawable_report(path: Path, tables: str | None = None) -> dict:
    """The report at ``path`` (``load.read_report``), whole by its schema (``schema.py``),
    with at least one evaluation to draw, and every figure agreeing (``check``): a picture of
    an edited ОРП would pass for a measured one."""
    report = read_report(path)
    problems = validate(report)
    if problems:
        raise ReportError(f"{path}: not a whole report: {problems[0]}")
    if not report["evaluations"] or not report["benchmarks"]:
        why = f" ({report['exit_reason']})" if report["exit_reason"] else ""
        raise ReportError(f"{path}: no result to draw: no performance test finished{why}")
    disagreement = first_disagreement(report, tables)
    if disagreement is not None:
        raise ReportError(
            f"{path}: does not check (python -m pytest_gostcnn check): {disagreement}"
        )
    return report


def write_picture(report_path: Path, path: Path, svg: str) -> None:
    """Write ``svg`` to ``path`` atomically: a new file beside it, then a rename, so a
    half-written picture never stays on disk."""
    if not path.parent.is_dir():
        raise PictureError(f"-o {path}: folder {path.parent} does not exist")
    if path.exists() and path.resolve() == report_path.resolve():
        raise PictureError(f"-o {path}: is the report itself; name another file")
    if path.suffix.lower() != ".svg":
        raise PictureError(f"-o {path}: plot writes SVG only; name a .svg file")
    try:
        write_atomically(path, svg, ".gost-plot.")
    except OSError as exc:
        raise PictureError(f"-o {path}: cannot write in {path.parent} ({exc.strerror})") from None
