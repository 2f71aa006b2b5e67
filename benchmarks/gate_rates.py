"""How often the paired gate (``--gost-versus``) and the report-baseline gate
(``--gost-compare``) raise a false alarm, and how often each catches a backend made slower,
measured on the same runs: docs/benchmarking.md, "Two gates measured".

Runs the suite ``--runs`` times with the NumPy backend against itself (``--gost-versus=numpy``)
and as many times with the NumPy backend made ``--slower`` slower against it (a sleep, or
with ``--how spin`` a spin of the CPU, of that share of each round's own work, inside its
rounds), the two interleaved so that the
machine's drift falls on both. The paired gate's verdict is each run's own. The report gate
is applied to the same runs' candidate timings as a CI job would apply it: each NumPy run
against the NumPy run before it (false alarms) and each slowed run against the NumPy run
before it (catches), by ``reports/compare.py``'s rule at ``--fail``::

    python benchmarks/gate_rates.py --runs 20 --fail 5 -- --gost-networks=Sh \\
        --gost-mode=inference --gost-batch=2 --gost-images=200 -k test_benchmark

The arguments after ``--`` are given to every run. It prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_gostcnn.reports.check import checked_report
from pytest_gostcnn.reports.compare import compare
from pytest_gostcnn.reports.load import timings
from pytest_gostcnn.reports.paired import LEVEL, decide, paired

SLOWED = '''"""The NumPy backend, {slower} x each round's own work added inside its rounds, as a
sleep or as a spin of the CPU."""
import time

from pytest_gostcnn.backends.numpy import NumpyBackend


def wait(seconds):
    if "{how}" == "sleep":
        time.sleep(seconds)
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Slowed(NumpyBackend):
    version = NumpyBackend.version + "+slowed"

    def infer(self, network, weights, image):
        start = time.perf_counter()
        output = super().infer(network, weights, image)
        wait({slower} * (time.perf_counter() - start))
        return output

    def train(self, network, weights, image, out_residual):
        start = time.perf_counter()
        result = super().train(network, weights, image, out_residual)
        wait({slower} * (time.perf_counter() - start))
        return result
'''
KINDS = {"same": "numpy", "slowed": "slowed:Slowed"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each kind")
    parser.add_argument("--fail", type=float, default=5.0, help="the gates' allowed percent")
    parser.add_argument("--slower", type=float, default=0.1, help="the wait, per round's work")
    parser.add_argument(
        "--how",
        choices=("sleep", "spin"),
        default="sleep",
        help="the wait: a sleep, or a spin of the CPU (which a loaded machine slows as it "
        "slows the work; a sleeper gets the CPU back first when it wakes)",
    )
    parser.add_argument(
        "--rejudge",
        metavar="FOLDER",
        help="run nothing: judge an earlier measurement's reports again by this code's rule",
    )
    parser.add_argument("pytest_args", nargs="*", help="given to every run (after --)")
    args = parser.parse_args()
    if args.rejudge:
        return _summary(_rejudged(Path(args.rejudge), args.fail), args)
    folder = Path(tempfile.mkdtemp(prefix="gate_rates_"))
    (folder / "slowed.py").write_text(
        SLOWED.format(slower=args.slower, how=args.how), encoding="utf-8"
    )
    runs: dict[str, list[dict]] = {kind: [] for kind in KINDS}
    for run in range(args.runs):
        for kind, backend in KINDS.items():
            path = folder / f"{kind}-{run}.json"
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            command += [f"--gost-backend={backend}", "--gost-versus=numpy"]
            command += [f"--gost-compare-fail={args.fail:g}", f"--gost-report={path}"]
            started = time.monotonic()
            done = subprocess.run(
                [*command, *args.pytest_args], cwd=folder, capture_output=True, text=True
            )
            if done.returncode not in (0, 6, 7) or not path.is_file():
                print(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-2000:]}")
                return 1
            report = checked_report(path)  # its figures and verdicts recomputed
            runs[kind].append({"path": str(path), "report": report, "status": done.returncode})
            tests = report["versus"]["tests"]
            said = "; ".join(_verdict(t) for t in tests)
            print(
                f"run {run + 1}/{args.runs} {kind}: exit {done.returncode} in "
                f"{time.monotonic() - started:.0f} s, load {os.getloadavg()[0]:.1f}: {said}",
                flush=True,
            )
    print(f"reports in {folder}")
    return _summary(runs, args)


def _rejudged(folder: Path, allowed: float) -> dict[str, list[dict]]:
    """The reports of an earlier measurement in ``folder``, each test's verdict given
    again from its pairs by this code's rule (``reports/paired.py``)."""
    runs: dict[str, list[dict]] = {kind: [] for kind in KINDS}
    for kind, kept in runs.items():
        for path in sorted(folder.glob(f"{kind}-*.json"), key=lambda p: int(p.stem.split("-")[1])):
            report = json.loads(path.read_text(encoding="utf-8"))
            versus = report["versus"]
            tests = versus["holm_tests"]
            earlier = []
            for test in versus["tests"]:
                if test["paired"] is None:
                    continue
                now = paired(
                    test["test"],
                    test["candidate_seconds"],
                    test["baseline_seconds"],
                    test["candidate_first"],
                    allowed,
                    LEVEL / tests,
                )
                verdict = decide(earlier, now, tests)
                earlier.append(now)
                test.update(fell=verdict.fell, not_compared=verdict.not_compared)
                test["paired"] = now.as_dict()
            kept.append({"path": str(path), "report": report})
    return runs


def _summary(runs: dict[str, list[dict]], args) -> int:
    """Both gates' false alarms and catches over ``runs``, printed."""
    print(
        f"--fail {args.fail:g}, {len(runs['same'])} runs of each kind, slowed "
        f"{args.slower:.0%} ({args.how}), arguments {' '.join(args.pytest_args)}"
    )
    for kind, word in (("same", "false alarms"), ("slowed", "caught")):
        fell, undecided, total = _paired(runs[kind])
        print(
            f"paired gate, {word}: {fell}/{total} runs fell ({100 * fell / total:.0f} %), "
            f"{undecided} compared nothing (exit 7)"
        )
    same, slowed = runs["same"], runs["slowed"]
    alarms = _reported(zip(same, same[1:], strict=False), args.fail)
    catches = _reported(zip(same, slowed, strict=False), args.fail)
    for word, (fell, undecided, total, unruled) in (("false alarms", alarms), ("caught", catches)):
        print(
            f"report gate, {word}: {fell}/{total} pairs of runs fell "
            f"({100 * fell / max(total, 1):.0f} %), {undecided} not compared (cell shared); "
            f"without the shared-cell rule {unruled}/{total} "
            f"({100 * unruled / max(total, 1):.0f} %)"
        )
    return 0


def _verdict(test: dict) -> str:
    paired = test["paired"]
    figures = "" if paired is None else f"{paired['slowdown']:+.1f} % "
    if paired is not None and paired["detectable"] is not None:
        figures += f"(sees {paired['detectable']:.1f} %) "
    word = "FELL" if test["fell"] else "not compared" if test["not_compared"] else "ok"
    return f"{test['test']} {figures}{word}"


def _paired(runs: list[dict]) -> tuple[int, int, int]:
    """How many runs the paired gate failed (a test fell), how many it decided nothing for
    (no test fell, one not compared), of how many."""
    fell = sum(any(t["fell"] for t in r["report"]["versus"]["tests"]) for r in runs)
    undecided = sum(
        not any(t["fell"] for t in r["report"]["versus"]["tests"])
        and any(t["not_compared"] for t in r["report"]["versus"]["tests"])
        for r in runs
    )
    return fell, undecided, len(runs)


def _reported(pairs, allowed: float) -> tuple[int, int, int, int]:
    """The report gate on (baseline run, run now) pairs: how many fell, how many compared
    nothing as a cell was shared, of how many; and how many would have fallen without the
    shared-cell rule."""
    fell = undecided = total = unruled = 0
    for baseline, now in pairs:
        then = list(timings(baseline["report"]).values())
        later = list(timings(now["report"]).values())
        comparison = compare(baseline["path"], then, later, allowed)
        fell += bool(comparison.fallen)
        undecided += not comparison.fallen and bool(comparison.undecided())
        unruled += any(
            c.slowdown is not None and c.slowdown > allowed and c.slowdown_at_least > allowed
            for c in comparison.changes
        )
        total += 1
    return fell, undecided, total, unruled


if __name__ == "__main__":
    sys.exit(main())
