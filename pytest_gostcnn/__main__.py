"""Command line: check network tables, print the project's Table 1, time the reference;
check, merge and draw written reports.

python -m pytest_gostcnn tables [--tables SET_OR_DIR]
python -m pytest_gostcnn reference [--tables SET_OR_DIR] [--networks R,Sh] [--batch 2] [--seed 0]
python -m pytest_gostcnn check REPORT... [--tables DIR]
python -m pytest_gostcnn evaluate REPORT... [-o PATH]
python -m pytest_gostcnn plot REPORT -o FILE.svg
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc

import numpy as np

from pytest_gostcnn.machine.peak import Peak
from pytest_gostcnn.model import executor
from pytest_gostcnn.model.complexity import inference_macs, training_macs
from pytest_gostcnn.model.data import draw_input, draw_out_residual, draw_weights
from pytest_gostcnn.model.layers import Layer
from pytest_gostcnn.model.network import Network, TableError, load_networks
from pytest_gostcnn.performance.rounds import plan
from pytest_gostcnn.plugin import summary
from pytest_gostcnn.plugin.options import BY_NAME, OPTIONS, select_networks
from pytest_gostcnn.plugin.report import write_report
from pytest_gostcnn.reports import check, merge
from pytest_gostcnn.reports.load import ReportError, read_report
from pytest_gostcnn.reports.plot import plot


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "check":
        return check.main(args.reports, args.tables, print)
    if args.command == "evaluate":
        return _evaluate(args.reports, args.output)
    if args.command == "plot":
        return plot(args.report, args.output)
    try:
        networks = load_networks(args.tables)
        if args.command == "reference":
            networks = select_networks(networks, args.networks, "--networks", "--tables")
    except (TableError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.command == "tables":
        print(table_1(list(networks.values())))
        return 0
    for network in networks.values():
        try:
            print(_reference_run(network, args.batch, args.seed, args.weights), flush=True)
        except MemoryError:
            print(
                f"error: {network.letter} ({network.latin}) at B={args.batch} does not fit in "
                "memory as float64; try a smaller --batch",
                file=sys.stderr,
            )
            return 1
    return 0


def _evaluate(paths: list[str], output: str | None) -> int:
    """Merge the reports, print the evaluation as the plugin does, write it with ``-o``."""
    try:
        if output is not None:
            output = BY_NAME["report"].parse("-o", output)  # a file can be written there
        twice = sorted({path for path in paths if paths.count(path) > 1})
        if twice:
            print(f"given more than once, read once: {', '.join(twice)}")
        paths = list(dict.fromkeys(paths))
        reports = [(path, read_report(path)) for path in paths]
        merged = merge.merge_reports(reports)
    except (ReportError, ValueError) as exc:  # MergeError is a ValueError
        print(f"error: {exc}", file=sys.stderr)
        return 1
    report = merged.report
    options = report["options"]
    peak = Peak.from_dict(report["peak"]) if report["peak"] else None
    lines = summary.performance_lines(
        plan(options["profile"], options["batch"], options["images"]),
        options["dtype"],
        peak,
        options["table_set"],
        merged.timings,
        merged.evaluations,
    )
    print(f"merged {len(paths)} reports: {', '.join(paths)}")
    for line in lines:
        print(line)
    if output is not None:
        write_report(output, report)
        print(f"merged report written to {output}")
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


FLOAT16_MAX = 65504.0  # the largest finite float16


class _Largest:
    """Kernels that pass every call to ``kernels`` and note each layer's largest forward
    value (``|x|``), by row number."""

    def __init__(self, kernels: object) -> None:
        self.kernels = kernels
        self.by_row: dict[int, float] = {}

    def __getattr__(self, name: str) -> object:
        return getattr(self.kernels, name)

    def forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        outputs = self.kernels.forward(layer, inputs, weights)
        self.by_row[layer.number] = max(float(np.abs(out).max()) for out in outputs)
        return outputs


def _reference_run(network: Network, batch: int, seed: int, reading: str) -> str:
    from pytest_gostcnn.reference import ReferenceKernels

    # NumPy reports its arrays to tracemalloc: the peak counts the weights, the draws, every
    # map the iteration keeps and its largest temporaries (not BLAS's own small buffers).
    tracemalloc.start()
    try:
        rng = np.random.default_rng(seed)
        weights = draw_weights(network, rng, reading)
        image = draw_input(network, batch, rng)
        out_residual = draw_out_residual(network, batch, rng)
        kernels = _Largest(ReferenceKernels())
        start = time.perf_counter()
        result = executor.train(network, kernels, weights, image, out_residual)
        seconds = time.perf_counter() - start
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    gradient = max(
        (float(np.abs(g).max()) for grads in result.gradients.values() for g in grads.values()),
        default=0.0,
    )
    over = [
        (row, position)
        for position, row in enumerate(kernels.by_row, 1)
        if kernels.by_row[row] > FLOAT16_MAX
    ]
    rows = len(network.layers)
    float16 = f"row {over[0][0]} (layer {over[0][1]} of {rows})" if over else "none"
    return (
        f"{network.letter} ({network.latin}): one float64 training iteration at B={batch}, "
        f"{reading} weights, "
        f"in {seconds:.2f} s, peak memory {peak_bytes / 2**30:.2f} GiB; "
        f"max |output| {np.abs(result.output).max():.3g}, "
        f"max |input residual| {np.abs(result.input_residual).max():.3g}, "
        f"largest forward value {max(kernels.by_row.values()):.3g}, "
        f"largest gradient {gradient:.3g}; first row past float16's 65504: {float16}"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gostcnn",
        description="GOST R 57700.36-2021 network tables and float64 reference.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    tables = sub.add_parser("tables", help="check the network tables and print Table 1 (MACs)")
    reference = sub.add_parser(
        "reference", help="run one training iteration per network through the float64 reference"
    )
    checker = sub.add_parser(
        "check",
        help="recompute every figure of --gost-report files and name each disagreement",
    )
    checker.add_argument("reports", nargs="+", metavar="REPORT")
    checker.add_argument(
        "--tables",
        metavar="DIR",
        help="the directory of tables a report of --gost-tables=DIR was run on",
    )
    evaluate = sub.add_parser(
        "evaluate",
        help="merge the reports of runs of one configuration into one evaluation per mode",
    )
    evaluate.add_argument("reports", nargs="+", metavar="REPORT")
    evaluate.add_argument("-o", "--output", metavar="PATH", help="write the merged report here")
    plotting = sub.add_parser(
        "plot", help="draw a --gost-report's evaluation (section 9.8) as an SVG picture"
    )
    plotting.add_argument("report", metavar="REPORT", help="a report written by --gost-report")
    plotting.add_argument("-o", "--output", metavar="FILE.svg", required=True, help="the picture")
    # The same options as the plugin's --gost-*, with the same checks.
    BY_NAME["tables"].add_argument(tables)
    for option in OPTIONS:
        if option.command:
            option.add_argument(reference)
    return parser


def _main() -> int:
    """``main``, quiet when its reader stops early (``... | head``), as other commands are."""
    try:
        return main()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 1


if __name__ == "__main__":
    sys.exit(_main())
