"""How close a correct backend's checked training segments come to failing: the NumPy backend
in float32 runs ``--segments`` training segments of ``--rounds`` rounds on one network, each
from the weights of its own seed and with round keys from a seeded generator, and each
segment is checked (the replay of ``conformance/replay.py``). Prints each segment's worst
СКО/СКОП and the array it was found in, then the failures and the largest ratios; asserts
nothing (docs/verification.md, "Average pooling")::

    python benchmarks/correct_segments.py --segments 100 --network Sh --batch 1

A ratio far above the rest marks a segment whose update took a near tie (a ReLU's input or
a window's maximum within rounding of it) the other way from the float64 reference.
"""

from __future__ import annotations

import argparse
import random

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.model.network import load_networks
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.rounds import Links, Rounds, TimedTest


def segment(network, batch: int, rounds: int, seed: int):
    """The check of one segment of ``rounds`` rounds, warm-up first, driven as
    ``benchmark.pedantic`` drives them."""
    run_plan = Plan("quick", rounds=rounds, warmup_rounds=1, batch=batch)
    test = TimedTest(NumpyBackend("float32"), network, "training", run_plan, seed=seed)
    loop = Rounds(test, Links(randomness=random.Random(1000 + seed)))
    for _ in range(run_plan.warmup_rounds + run_plan.rounds):
        arguments, _ = loop.setup()
        loop.target(*arguments)
        loop.teardown(*arguments)
    (audit,) = loop.audits
    return audit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("::")[0])
    parser.add_argument("--segments", type=int, default=100)
    parser.add_argument("--network", default="Sh", help="a Latin id of the shipped analogs")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=16, help="rounds a segment")
    parser.add_argument("--first-seed", type=int, default=0)
    args = parser.parse_args()
    network = load_networks()[args.network]
    ratios = []
    for seed in range(args.first_seed, args.first_seed + args.segments):
        audit = segment(network, args.batch, args.rounds, seed)
        ratios.append((audit.worst_ratio or 0.0, seed, audit.passed))
        print(f"seed {seed}: {audit.verdict}, worst {ratios[-1][0]:.4f} ({audit.worst_array})")
    failed = sum(not passed for _, _, passed in ratios)
    largest = ", ".join(f"{r:.3f} (seed {s})" for r, s, _ in sorted(ratios, reverse=True)[:5])
    print(f"{failed} of {len(ratios)} segments failed; largest worst ratios: {largest}")


if __name__ == "__main__":
    main()
