"""The README's quick run from two installs of the suite, in turn, pair by pair: each run's
wall time, its timed rounds and its checks' seconds (the summary's "suite's own time" line),
and the checks' ratio new / old per pair. Prints; asserts nothing.

    python benchmarks/quick_run_pair.py --old /path/to/old/.venv/bin/python --pairs 2

``--old`` and ``--new`` are Python interpreters that each have a version of the suite
installed (a virtual environment of another checkout, say); ``--new`` defaults to this one.
Extra arguments after ``--`` go to both runs.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time

OWN_TIME = re.compile(
    r"the suite's own time \(beside (?P<timed>[0-9.]+) s of timed rounds\): [0-9.]+ s: "
    r"checks (?P<checks>[0-9.]+) s"
)


def one_run(python: str, extra: list[str]) -> tuple[float, float, float]:
    """(wall, timed rounds, checks) seconds of one quick run in a fresh directory."""
    with tempfile.TemporaryDirectory() as folder:
        command = [python, "-m", "pytest", "-p", "no:cacheprovider", "--gost-backend=numpy"]
        started = time.monotonic()
        done = subprocess.run(
            [*command, *extra], cwd=folder, capture_output=True, text=True, timeout=3600
        )
        wall = time.monotonic() - started
    match = OWN_TIME.search(done.stdout)
    if match is None:
        sys.exit(f"no suite's-own-time line in the run's output:\n{done.stdout[-3000:]}")
    return wall, float(match["timed"]), float(match["checks"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="the other install's interpreter")
    parser.add_argument("--new", default=sys.executable, help="(this interpreter)")
    parser.add_argument("--pairs", type=int, default=2, help="(2)")
    parser.add_argument("extra", nargs="*", help="arguments for both runs, after --")
    options = parser.parse_args()
    print(f"{'pair':>4} {'which':5} {'wall s':>7} {'timed s':>8} {'checks s':>9} {'new/old':>8}")
    for pair in range(1, options.pairs + 1):
        old = one_run(options.old, options.extra)
        new = one_run(options.new, options.extra)
        for which, (wall, timed, checks) in (("old", old), ("new", new)):
            ratio = f"{new[2] / old[2]:.2f}" if which == "new" else ""
            print(f"{pair:>4} {which:5} {wall:>7.1f} {timed:>8.2f} {checks:>9.1f} {ratio:>8}")


if __name__ == "__main__":
    main()
