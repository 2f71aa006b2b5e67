"""How often the baseline gate (``reports/compare.py``) raises a false alarm, and how often it
catches a backend made slower: docs/benchmarking.md, "A gate on a baseline".

Runs the suite ``--runs`` times on the NumPy backend and as many times on the same backend
with a sleep of ``--slower`` times each round's own work added inside its rounds, the two
interleaved so that the machine's drift falls on both; then applies the gate's rule
(``reports/compare.py``'s ``compare``, which ``compare`` and ``--gost-compare`` apply after
checking that two reports are of one configuration, which a backend of another name is not)
to every ordered pair of NumPy runs (false alarms) and every NumPy run against every slowed
one (catches) at ``--fail``::

    python benchmarks/gate_rates.py --runs 12 --fail 5 -- --gost-networks=M,Sh \\
        --gost-mode=inference -k test_benchmark

The arguments after ``--`` are given to every run. A pair counts once however many of its
tests fell.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_gostcnn.reports.check import checked_report
from pytest_gostcnn.reports.compare import compare
from pytest_gostcnn.reports.load import timings

SLOWED = '''"""The NumPy backend, a sleep of {slower} x each round's own work inside its rounds."""
import time

from pytest_gostcnn.backends.numpy import NumpyBackend


class Slowed(NumpyBackend):
    version = NumpyBackend.version + "+slowed"

    def infer(self, network, weights, image):
        start = time.perf_counter()
        output = super().infer(network, weights, image)
        time.sleep({slower} * (time.perf_counter() - start))
        return output

    def train(self, network, weights, image, out_residual):
        start = time.perf_counter()
        result = super().train(network, weights, image, out_residual)
        time.sleep({slower} * (time.perf_counter() - start))
        return result
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12, help="runs of each backend")
    parser.add_argument("--fail", type=float, default=5.0, help="the gate's allowed percent")
    parser.add_argument("--slower", type=float, default=0.2, help="the sleep, per round's work")
    parser.add_argument("pytest_args", nargs="*", help="given to every run (after --)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="gate_rates_"))
    (folder / "slowed.py").write_text(SLOWED.format(slower=args.slower), encoding="utf-8")
    reports: dict[str, list[str]] = {"numpy": [], "slowed:Slowed": []}
    for run in range(args.runs):
        for backend, paths in reports.items():
            path = str(folder / f"{backend.partition(':')[0]}-{run}.json")
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            command += [f"--gost-backend={backend}", f"--gost-report={path}", *args.pytest_args]
            done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-2000:]}")
                return 1
            paths.append(path)
            print(f"run {run + 1}/{args.runs}: {backend}", flush=True)
    paths = [path for runs in reports.values() for path in runs]
    tests = {path: list(timings(checked_report(path)).values()) for path in paths}
    fast, slow = reports["numpy"], reports["slowed:Slowed"]
    alarms = _count(tests, itertools.permutations(fast, 2), args.fail)
    catches = _count(tests, itertools.product(fast, slow), args.fail)
    print(f"--fail {args.fail:g}, {args.runs} runs of each backend, reports in {folder}")
    print(f"false alarms: {_share(alarms)} of the ordered pairs of numpy runs")
    print(f"caught: {_share(catches)} of the pairs numpy run, run {args.slower:.0%} slower")
    return 0


def _count(tests: dict, pairs, allowed: float) -> tuple[int, int, dict[str, int]]:
    """How many pairs fell, of how many, and how often each test fell."""
    fell = total = 0
    by_test: dict[str, int] = {}
    for baseline, now in pairs:
        fallen = compare(baseline, tests[baseline], tests[now], allowed).fallen
        for change in fallen:
            by_test[change.test] = by_test.get(change.test, 0) + 1
        fell += bool(fallen)
        total += 1
    return fell, total, by_test


def _share(counted: tuple[int, int, dict[str, int]]) -> str:
    fell, total, by_test = counted
    tests = ", ".join(f"{test} {n}" for test, n in sorted(by_test.items())) or "no test"
    return f"{fell}/{total} ({100 * fell / total:.1f} %; by test: {tests})"


if __name__ == "__main__":
    sys.exit(main())
