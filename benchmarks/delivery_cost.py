"""What the delivered copies, their fingerprints and the round-by-round check draw cost a
round of Ш (Sh) inference at B = 2 on the NumPy backend: this checkout's round loop
against an earlier commit's, alternated in one process (docs/benchmarking.md, "Checked
rounds"). Prints the medians and their ratio; asserts nothing.

    python benchmarks/delivery_cost.py [--against COMMIT] [--tests N] [--rounds N]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.networks import __file__ as networks_file
from pytest_gostcnn.performance import rounds as rounds_now
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.timing import Check

REPOSITORY = Path(__file__).resolve().parent.parent


def rounds_then(commit: str, folder: Path):
    """``performance/rounds.py`` as it was at ``commit``, imported as its own package."""
    archive = subprocess.run(
        ["git", "archive", commit, "pytest_gostcnn/performance"],
        cwd=REPOSITORY, capture_output=True, check=True,
    ).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    (folder / "pytest_gostcnn" / "performance").rename(folder / "performance_then")
    sys.path.insert(0, str(folder))
    return importlib.import_module("performance_then.rounds")


def alternated(modules: dict, network, rounds: int) -> dict[str, tuple[list, list]]:
    """One test of each module, their rounds run in turn (which goes first alternating),
    so a drift of the machine weighs on both: each timed round's target seconds and
    whole-round seconds (setup to teardown); the checks a stand-in that passes at once."""
    plan = Plan("quick", rounds=rounds, warmup_rounds=1, batch=2)
    loops = {}
    for name, module in modules.items():
        test = module.TimedTest(NumpyBackend("float32"), network, "inference", plan, seed=3)
        check = module.Links(check=lambda a: Check(a.number, True, "correct", None, None, None))
        loops[name] = module.Rounds(test, check)
    samples: dict[str, tuple[list, list]] = {name: ([], []) for name in modules}
    order = list(modules)
    for call in range(plan.warmup_rounds + plan.rounds):
        order.reverse()
        for name in order:
            loop = loops[name]
            started = time.perf_counter()
            arguments, _ = loop.setup()
            begun = time.perf_counter()
            loop.target(*arguments)
            ended = time.perf_counter()
            loop.teardown(*arguments)
            if call >= plan.warmup_rounds:
                samples[name][0].append(ended - begun)
                samples[name][1].append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="21cca03", help="the earlier commit")
    parser.add_argument("--tests", type=int, default=20, help="tests of each, alternated")
    parser.add_argument("--rounds", type=int, default=50, help="timed rounds a test")
    args = parser.parse_args()
    network = load_networks(Path(networks_file).parent)["Sh"]
    with tempfile.TemporaryDirectory() as folder:
        then = rounds_then(args.against, Path(folder))
        samples = {"then": ([], []), "now": ([], [])}
        for _ in range(args.tests):
            for name, (timed, whole) in alternated(
                {"then": then, "now": rounds_now}, network, args.rounds
            ).items():
                samples[name][0].extend(timed)
                samples[name][1].extend(whole)
    for index, what in enumerate(("timed region", "whole round")):
        then_s = statistics.median(samples["then"][index])
        now_s = statistics.median(samples["now"][index])
        print(
            f"{what}: median {1e3 * then_s:.4f} ms at {args.against}, {1e3 * now_s:.4f} ms "
            f"now, {len(samples['now'][index])} rounds each: {100 * (now_s / then_s - 1):+.2f} %"
        )


if __name__ == "__main__":
    main()
