"""Command line: check network tables, print the project's Table 1, time the reference,
export the networks as ONNX files; check, merge, compare and draw written reports.

python -m pytest_gostcnn tables [--tables SET_OR_DIR]
python -m pytest_gostcnn reference [--tables SET_OR_DIR] [--networks R,Sh] [--batch 2] [--seed 0]
                                   [--reference-memory 2GB]
python -m pytest_gostcnn export --format onnx -o DIR [--tables ...] [--networks ...] [--batch 2]
python -m pytest_gostcnn check REPORT... [--tables DIR]
python -m pytest_gostcnn evaluate REPORT... [-o PATH] [--tables DIR]
python -m pytest_gostcnn compare BASELINE REPORT [--fail PERCENT] [--tables DIR]
python -m pytest_gostcnn plot REPORT -o FILE.svg [--tables DIR]
"""

from __future__ import annotations

import argparse
import os
import sys

from pytest_gostcnn.reports import check
from pytest_gostcnn.reports.plot import plot
from pytest_gostcnn.run import commands
from pytest_gostcnn.run.option_definitions import BY_NAME, OPTIONS

# Every command that reads reports checks them: a report of --gost-tables=DIR needs its tables.
TABLES_HELP = "the directory of tables a report of --gost-tables=DIR was run on"


def _directory(text: str) -> str:
    """``--tables DIR``: a directory that exists (else a report would check without it)."""
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text}: no such directory")
    return text


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "check":
        return check.main(args.reports, args.tables, print)
    if args.command == "evaluate":
        return commands.evaluate(args.reports, args.output, args.tables)
    if args.command == "compare":
        return commands.compare(args.baseline, args.report, args.fail, args.tables)
    if args.command == "plot":
        return plot(args.report, args.output, args.tables)
    if args.command == "tables":
        return commands.tables(args.tables)
    if args.command == "export":
        return commands.export(
            args.tables, args.networks, args.batch, args.seed, args.weights, args.output
        )
    return commands.reference(
        args.tables, args.networks, args.batch, args.seed, args.weights, args.reference_memory
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gostcnn",
        description=(
            "GOST R 57700.36-2021: network tables, the float64 reference, and reports "
            "(check, evaluate, compare, plot)."
        ),
    )
    sub = parser.add_subparsers(dest="command", required=True)
    tables = sub.add_parser("tables", help="check the network tables and print Table 1 (MACs)")
    reference = sub.add_parser(
        "reference", help="run one training iteration per network through the float64 reference"
    )
    exporting = sub.add_parser(
        "export",
        help="write each network as an ONNX file with section 8's weights for --seed, and "
        "its drawn input (.input.npy), for ONNX Runtime or a vendor's compiler",
    )
    exporting.add_argument("--format", choices=("onnx",), required=True, help="the file format")
    exporting.add_argument("-o", "--output", metavar="DIR", required=True, help="the folder")
    checker = sub.add_parser(
        "check",
        help="recompute every figure of --gost-report files and name each disagreement",
    )
    checker.add_argument("reports", nargs="+", metavar="REPORT")
    checker.add_argument("--tables", metavar="DIR", type=_directory, help=TABLES_HELP)
    evaluate = sub.add_parser(
        "evaluate",
        help="merge the reports of runs of one configuration into one evaluation per mode",
    )
    evaluate.add_argument("reports", nargs="+", metavar="REPORT")
    evaluate.add_argument("-o", "--output", metavar="PATH", help="write the merged report here")
    evaluate.add_argument("--tables", metavar="DIR", type=_directory, help=TABLES_HELP)
    comparing = sub.add_parser(
        "compare",
        help="each test in REPORT against BASELINE's; exit 6 when one is slower beyond --fail",
    )
    comparing.add_argument("baseline", metavar="BASELINE", help="the report to compare with")
    comparing.add_argument("report", metavar="REPORT", help="the report of the run now")
    BY_NAME["compare_fail"].add_argument(comparing, "--fail")
    comparing.add_argument("--tables", metavar="DIR", type=_directory, help=TABLES_HELP)
    plotting = sub.add_parser(
        "plot", help="draw a --gost-report's evaluation (section 9.8) as an SVG picture"
    )
    plotting.add_argument("report", metavar="REPORT", help="a report written by --gost-report")
    plotting.add_argument("-o", "--output", metavar="FILE.svg", required=True, help="the picture")
    plotting.add_argument("--tables", metavar="DIR", type=_directory, help=TABLES_HELP)
    # The same options as the plugin's --gost-*, with the same checks.
    BY_NAME["tables"].add_argument(tables)
    for option in OPTIONS:
        if option.command:
            option.add_argument(reference)
            option.add_argument(exporting)
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
