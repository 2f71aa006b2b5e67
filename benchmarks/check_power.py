"""How often a backend that cheats in a random few of its timed rounds passes the checks,
measured over many runs with the operating system's draw (docs/benchmarking.md, "What the
checks catch"). Prints; asserts nothing.

Each run drives one test's rounds as pytest-benchmark does, on a tiny table (a convolution,
a ReLU and a fully connected layer: a check costs milliseconds), with enough rounds that the
test's chance is below 1. A run passes when every check passed and no output repeated. The
cheats are tests/gost_test_backends.py's, each run with its own seed; the honest NumPy
backend (and PyTorch's, where installed) must pass every run.

    python benchmarks/check_power.py --runs 20
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import gost_test_backends as mutants  # noqa: E402

from pytest_gostcnn.backends.numpy import NumpyBackend  # noqa: E402
from pytest_gostcnn.judgement.result import repeated_outputs  # noqa: E402
from pytest_gostcnn.model.table_files import load_networks  # noqa: E402
from pytest_gostcnn.performance.checks import CHEAT_SHARES, Units  # noqa: E402
from pytest_gostcnn.performance.plan import Plan  # noqa: E402
from pytest_gostcnn.performance.rounds import Rounds, TimedTest  # noqa: E402
from pytest_gostcnn.performance.timing import CellTiming, Timing, macs_per_image  # noqa: E402

TABLE = """letter: Ш
name: tiny Ш
provenance: official
input: {X: 6, Y: 6, L: 2}
layers:
  - {n: 1, type: conv, F: 3, Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 2, type: relu, in1: 1}
  - {n: 3, type: fc, in1: 2, F: 4}
"""


def tiny_network():
    folder = Path(tempfile.mkdtemp())
    (folder / "Sh.yaml").write_text(TABLE, encoding="utf-8")
    return load_networks(folder)["Sh"]


def one_run(backend, network, mode: str, rounds: int, unit: int | None) -> tuple[bool, Rounds]:
    """One test's rounds: whether it passed, and its loop."""
    run_plan = Plan(None, rounds, 1, 1, rounds)
    loop = Rounds(TimedTest(backend, network, mode, run_plan, seed=3, unit_rounds=unit))
    for _ in range(run_plan.warmup_rounds + run_plan.rounds):
        arguments = loop.setup()
        loop.target(*arguments)
        loop.teardown()
    cell = CellTiming(0, "cpu", rounds, (1.0,) * rounds, None, "", tuple(loop.checks),
                      fingerprints=tuple(loop.fingerprints))  # fmt: skip
    timing = Timing("Sh", mode, "float32", 1, rounds, macs_per_image(network, mode), (cell,))
    passed = loop.error is None and all(a.passed for a in loop.checks)
    return passed and not repeated_outputs(timing), loop


def honest_torch():
    try:
        from pytest_gostcnn.backends.torch import TorchBackend
    except ImportError:
        return None
    return None if TorchBackend.unavailable_reason() else TorchBackend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each backend (20)")
    parser.add_argument("--inference-rounds", type=int, default=1000, help="(1000)")
    parser.add_argument("--training-rounds", type=int, default=400, help="(400)")
    parser.add_argument(
        "--unit", type=int, default=None, help="training's k (default: measured, as a run does)"
    )
    options = parser.parse_args()
    if options.unit is not None and not 1 <= options.unit <= 16:
        parser.error(f"--unit {options.unit}: from 1 to a segment's 16 rounds")
    network = tiny_network()
    cases = [
        ("SkipsTwoPercent", mutants.SkipsTwoPercent, "inference"),
        ("Float16FivePercent", mutants.Float16FivePercent, "inference"),
        ("DropsFivePercentOfUpdates", mutants.DropsFivePercentOfUpdates, "training"),
        ("RepeatsFivePercent", mutants.RepeatsFivePercent, "training"),
        ("Float16FivePercent", mutants.Float16FivePercent, "training"),
        ("numpy", NumpyBackend, "inference"),
        ("numpy", NumpyBackend, "training"),
    ]
    torch = honest_torch()
    if torch is not None:
        cases += [("torch", torch, "inference"), ("torch", torch, "training")]
    print(
        f"{'backend':26} {'mode':9} {'rounds':>6} {'units':>5} {'k':>2} {'chance':>7} "
        f"{'cheat':>5} {'pass if':>8} {'passed':>7} {'seconds':>7}"
    )
    for name, backend_class, mode in cases:
        rounds = options.inference_rounds if mode == "inference" else options.training_rounds
        passes, started = 0, time.monotonic()
        for run in range(options.runs):
            os.environ["GOST_TEST_CHEAT_SEED"] = str(run)
            passed, loop = one_run(backend_class("float32"), network, mode, rounds, options.unit)
            passes += passed
        share = getattr(backend_class, "share", 0.0)
        units = loop.units
        # A cheat in ``share`` of the rounds leaves about that many rounds wrong; each unit
        # of k rounds is wrong unless all k are spared.
        wrong = units.count * (1 - (1 - share) ** units.length)
        chance = loop.draw.chance
        passing = (1 - chance) ** wrong if share else 1.0
        print(
            f"{name:26} {mode:9} {rounds:>6} {units.count:>5} {units.length:>2} {chance:>7.3f} "
            f"{100 * share:>4g}% "
            f"{passing:>8.2g} {passes:>3}/{options.runs:<3} {time.monotonic() - started:>7.1f}"
        )
    for mode, rounds in (
        ("inference", options.inference_rounds),
        ("training", options.training_rounds),
    ):
        units = Units(mode, rounds, 16 if mode == "training" else None, 1)
        print(
            f"stated power, {mode}: {100 * units.power(units.chance):.2f} % against "
            f"{100 * CHEAT_SHARES[mode]:g} % of {rounds} rounds, units of one round, at a "
            f"chance of {units.chance:.3f}"
        )


if __name__ == "__main__":
    main()
