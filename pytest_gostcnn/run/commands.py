"""The command line's commands (``python -m pytest_gostcnn``) that are more than a call:
``tables`` (Table 1), ``reference`` (a float64 iteration per network), ``export`` (the
networks as ONNX files), ``evaluate`` (reports merged and evaluated as the plugin does) and
``compare`` (each test against a baseline's). Each prints and returns its exit status.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_gostcnn.machine.peak import Peak
from pytest_gostcnn.machine.pool import reference_work
from pytest_gostcnn.model.complexity import inference_macs, training_macs
from pytest_gostcnn.model.memory import MemoryBoundError
from pytest_gostcnn.model.network import Network, TableError
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.performance.plan import plan
from pytest_gostcnn.reference.iteration import training_iteration
from pytest_gostcnn.reports import merge
from pytest_gostcnn.reports.check import checked_report
from pytest_gostcnn.reports.compare import FELL, configuration_differences
from pytest_gostcnn.reports.compare import compare as comparison_of
from pytest_gostcnn.reports.load import ReportError, timings

from .comparison_summary import comparison_lines
from .option_definitions import BY_NAME
from .options import select_networks
from .performance_summary import performance_lines
from .report import write_report


def tables(tables_given: str | None) -> int:
    """Check the tables and print the project's Table 1."""
    try:
        networks = load_networks(tables_given)
    except (TableError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table_1(list(networks.values())))
    return 0


def reference(
    tables_given: str | None,
    selected: str | None,
    batch: int,
    seed: int,
    reading: str,
    memory: int | None = None,
) -> int:
    """One float64 training iteration per selected network, each described in a line, a
    slice of the batch at a time within ``memory`` bytes."""
    try:
        networks = load_networks(tables_given)
        networks = select_networks(networks, selected, "--networks", "--tables")
    except (TableError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for network in networks.values():
        try:
            with reference_work():  # as the suite runs it: the pool's threads, BLAS one each
                line = training_iteration(network, batch, seed, reading, memory)
            print(line, flush=True)
        except MemoryBoundError as exc:
            print(f"error: --reference-memory: {exc}", file=sys.stderr)
            return 2
        except MemoryError:
            print(
                f"error: {network.letter} ({network.latin}) at B={batch} does not fit in "
                "this host's memory as float64; try a smaller --reference-memory",
                file=sys.stderr,
            )
            return 1
    return 0


def export(
    tables_given: str | None,
    selected: str | None,
    batch: int,
    seed: int,
    reading: str,
    folder: str,
) -> int:
    """Each selected network as ``<latin>.onnx`` in ``folder``, with section 8's weights for
    ``seed`` and ``reading``, and its drawn input (``backends/onnxruntime/export.py``)."""
    try:
        from pytest_gostcnn.backends.onnxruntime.export import write_models
    except ModuleNotFoundError as exc:
        print(
            f"error: the export needs {exc.name}: pip install 'pytest-gostcnn[onnx]'",
            file=sys.stderr,
        )
        return 2
    try:
        networks = load_networks(tables_given)
        networks = select_networks(networks, selected, "--networks", "--tables")
        written = write_models(list(networks.values()), Path(folder), batch, seed, reading)
    except (TableError, ValueError) as exc:  # ExportError is a ValueError
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"error: -o {folder}: cannot write there ({exc.strerror}: {exc.filename})",
            file=sys.stderr,
        )
        return 2
    for path in written:
        print(
            f"{path} ({path.stat().st_size / 1e6:.1f} MB), input {path.with_suffix('.input.npy')}"
        )
    return 0


def evaluate(paths: list[str], output: str | None, tables: str | None = None) -> int:
    """Check each report as ``check`` does, merge them, print the evaluation as the plugin
    does, write it with ``-o``; ``tables``: the directory of a ``--gost-tables=DIR`` run.
    Exit status 2 for an ``-o`` no file can be written to, 1 for a report refused."""
    try:
        if output is not None:
            output = BY_NAME["report"].parse("-o", output)  # a file can be written there
    except ValueError as exc:  # a bad option, as argparse's: status 2 (docs/api.md)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        twice = sorted({path for path in paths if paths.count(path) > 1})
        if twice:
            print(f"given more than once, read once: {', '.join(twice)}")
        paths = list(dict.fromkeys(paths))
        # A report that does not check would carry its figures into the merge unseen.
        reports = [(path, checked_report(path, tables)) for path in paths]
        merged = merge.merge_reports(reports)
    except (ReportError, ValueError) as exc:  # MergeError is a ValueError
        print(f"error: {exc}", file=sys.stderr)
        return 1
    report = merged.report
    options = report["options"]
    peak = Peak.from_dict(report["peak"]) if report["peak"] else None
    lines = performance_lines(
        plan(options["profile"], options["batch"], options["images"]),
        options["dtype"],
        peak,
        merged.compliance,
        merged.timings,
        merged.evaluations,
    )
    print(f"merged {len(paths)} reports: {', '.join(paths)}")
    for note in merged.notes:
        print(f"note: {note}")
    for line in lines:
        print(line)
    if output is not None:
        write_report(output, report)
        print(f"merged report written to {output}")
    return 0


def compare(baseline: str, now: str, allowed: float | None, tables: str | None = None) -> int:
    """Each test in the report ``now`` against the report ``baseline``: the table, and
    ``FELL`` (6) when one is more than ``allowed`` percent slower, significantly
    (``reports/compare.py``); 2 when a report does not check or the two are of different
    configurations."""
    try:
        then, later = checked_report(baseline, tables), checked_report(now, tables)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    changed = configuration_differences(then, later, f"in {now}", f"in {baseline}")
    if changed:
        print(
            f"error: {now} is not of the configuration of the baseline {baseline}, so their ОРП "
            "cannot be compared: " + "; ".join(changed),
            file=sys.stderr,
        )
        return 2
    comparison = comparison_of(baseline, timings(then).values(), timings(later).values(), allowed)
    for line in comparison_lines(comparison):
        print(line)
    fell = comparison.reason()
    if fell is not None:
        print(f"exit status {FELL}: {fell}")
        return FELL
    return 0


def table_1(networks: list[Network]) -> str:
    """The project's Table 1: billions of MACs per image, with each table's provenance."""
    lines = [
        f"{'network':<8} {'layers':>6} {'inference':>10} {'training':>10}  provenance, name",
        f"{'':<8} {'':>6} {'GMAC/img':>10} {'GMAC/img':>10}",
    ]
    for n in networks:
        inference, training = inference_macs(n) / 1e9, training_macs(n) / 1e9
        lines.append(
            f"{n.letter} ({n.latin})".ljust(8)
            + f" {len(n.layers):>6} {inference:>10.4f} {training:>10.4f}  {n.provenance}, {n.name}"
        )
    return "\n".join(lines)
