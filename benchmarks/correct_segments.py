"""How close a correct backend's checked training segments come to failing: the NumPy backend
in float32 runs ``--segments`` training segments of ``--rounds`` rounds on one network, each
from the weights of its own seed and with round keys from a seeded generator, and each
segment is checked (the replay of ``conformance/replay.py``). Prints each segment's worst
СКО/СКОП and the array it was found in, then the failures and the largest ratios; with
``--independent``, each segment's check again with every average pooling's errors bounded
as independent (the bound before the shared one), its worst ratio and each round output's
СКОП as a share of the shipped bound's. Asserts nothing (docs/verification.md, "The model",
its average pooling)::

    python benchmarks/correct_segments.py --segments 100 --network Sh --batch 1
    python benchmarks/correct_segments.py --segments 1 --rounds 3 --network G --independent

A ratio far above the rest marks a segment whose update took a near tie (a ReLU's input or
a window's maximum within rounding of it) the other way from the float64 reference.
"""

from __future__ import annotations

import argparse
import random

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance import harness, replay
from pytest_gostcnn.conformance.error_kernels import ErrorModelKernels
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.rounds import Links, Rounds, TimedTest
from pytest_gostcnn.run.options import select_networks


class Independent(ErrorModelKernels):
    """The replay's model with every average pooling's errors bounded as independent."""

    carried = property(lambda self: False, lambda self, value: None)


ADMISSIBLE: dict[str, float] = {}  # each array's СКОП in the last check


def _noted(name, got, reference, *args, **kwargs):
    check = CHECK_ARRAY(name, got, reference, *args, **kwargs)
    ADMISSIBLE[name] = check.admissible
    return check


CHECK_ARRAY = harness.check_array  # the comparison ``_noted`` records, set in main()


def segment(network, batch: int, rounds: int, seed: int, model=ErrorModelKernels):
    """The check of one segment of ``rounds`` rounds, warm-up first, each round's setup,
    target and teardown in turn, as the suite's loop runs them."""
    replay.ErrorModelKernels = model
    ADMISSIBLE.clear()
    run_plan = Plan("quick", rounds=rounds, warmup_rounds=1, batch=batch)
    test = TimedTest(NumpyBackend("float32"), network, "training", run_plan, seed=seed)
    loop = Rounds(test, Links(randomness=random.Random(1000 + seed)))
    for _ in range(run_plan.warmup_rounds + run_plan.rounds):
        arguments = loop.setup()
        loop.target(*arguments)
        loop.teardown()
    (check,) = loop.checks
    return check, dict(ADMISSIBLE)


def one_network(parser: argparse.ArgumentParser, text: str):
    """The one analog ``--network`` names, Latin or Cyrillic; a usage error else."""
    try:
        chosen = list(select_networks(load_networks(), text, "--network").values())
    except ValueError as exc:
        parser.error(str(exc))
    if len(chosen) != 1:
        parser.error(f"--network {text}: one network, not {len(chosen)}")
    return chosen[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("::")[0])
    parser.add_argument("--segments", type=int, default=100)
    parser.add_argument("--network", default="Sh", help="one analog: M, G, V, S, R or Sh")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=16, help="rounds a segment")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--independent", action="store_true", help="the bound before, too")
    args = parser.parse_args()
    harness.check_array = _noted
    for name, least in (("segments", 1), ("rounds", 1), ("batch", 1)):
        if getattr(args, name) < least:
            parser.error(f"--{name} {getattr(args, name)}: at least {least}")
    if args.batch > 1024:
        parser.error(f"--batch {args.batch}: at most 1024")
    network = one_network(parser, args.network)
    ratios = []
    for seed in range(args.first_seed, args.first_seed + args.segments):
        check, admissible = segment(network, args.batch, args.rounds, seed)
        ratios.append((check.worst_ratio or 0.0, seed, check.passed))
        line = f"seed {seed}: {check.verdict}, worst {ratios[-1][0]:.4f} ({check.worst_array})"
        if args.independent:
            before, independent = segment(network, args.batch, args.rounds, seed, Independent)
            shares = [
                f"{independent[f'round {n} output'] / admissible[f'round {n} output']:.2f}"
                for n in range(1, args.rounds + 1)
            ]
            line += (
                f"; independent: {before.verdict}, worst {before.worst_ratio or 0.0:.4f}, "
                f"round outputs' СКОП {' '.join(shares)} of the shared bound's"
            )
        print(line, flush=True)
    failed = sum(not passed for _, _, passed in ratios)
    largest = ", ".join(f"{r:.3f} (seed {s})" for r, s, _ in sorted(ratios, reverse=True)[:5])
    print(f"{failed} of {len(ratios)} segments failed; largest worst ratios: {largest}")


if __name__ == "__main__":
    main()
