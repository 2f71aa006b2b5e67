"""How close a correct backend's checked training rounds come to failing: ``--backend``
(numpy or torch, float32) trains one analog for ``--rounds`` timed rounds in segments of 16,
round keys from the operating system, and every unit of ``--unit`` rounds is checked (the
draw forced to check all). Prints each failure as it comes, then how many units were
checked and failed, the worst ratios with their rounds and arrays, the ratios' quantiles,
the worst ratio of each kind of array (outputs, input residuals, updated weights, updates,
starts)
and the checks' time. Asserts nothing (docs/verification.md, "Checked rounds")::

    python benchmarks/correct_units.py --network Sh --batch 1 --rounds 5000
    python benchmarks/correct_units.py --network G --batch 2 --rounds 200 --backend torch
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from correct_segments import one_network

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance import harness, timed_check
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.rounds import Links, Rounds, TimedTest

WORST: dict[str, float] = {}  # the largest ratio of each kind of array


def _kind(name: str) -> str:
    for kind in ("output", "input residual", "updated", "update", "start"):
        if name.endswith(kind):
            return kind
    return name


def _noted(check):
    if check is not None and check.admissible > 0 and check.rmse is not None:
        kind = _kind(check.name)
        WORST[kind] = max(WORST.get(kind, 0.0), check.rmse / check.admissible)
    return check


def _record() -> None:
    """Every comparison of a check noted in ``WORST``, by kind."""
    compared = (harness, "check_array"), (timed_check, "update_check"), (timed_check, "start_check")
    for module, name in compared:
        compare = getattr(module, name)
        setattr(module, name, lambda *a, compare=compare, **k: _noted(compare(*a, **k)))


class Every:
    """A draw that checks every unit."""

    chance = 1.0

    def decide(self) -> bool:
        return True


def backend_class(name: str):
    if name == "numpy":
        return NumpyBackend
    from pytest_gostcnn.backends.torch import TorchBackend

    return TorchBackend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("::")[0])
    parser.add_argument("--network", default="Sh", help="one analog: M, G, V, S, R or Sh")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1000, help="timed rounds (1000)")
    parser.add_argument("--unit", type=int, default=1, help="rounds a unit, k (1)")
    parser.add_argument("--backend", choices=("numpy", "torch"), default="numpy")
    args = parser.parse_args()
    _record()
    for name, least in (("rounds", 1), ("batch", 1), ("unit", 1)):
        if getattr(args, name) < least:
            parser.error(f"--{name} {getattr(args, name)}: at least {least}")
    if args.batch > 1024 or args.unit > 16:
        parser.error("--batch is at most 1024, --unit at most a segment's 16 rounds")
    network = one_network(parser, args.network)
    run_plan = Plan(None, args.rounds, 1, args.batch, args.rounds * args.batch)
    backend = backend_class(args.backend)("float32")
    test = TimedTest(backend, network, "training", run_plan, seed=0, unit_rounds=args.unit)
    loop = Rounds(test, Links())  # round keys: the operating system's
    loop.draw = Every()
    started = time.monotonic()
    for _ in range(run_plan.warmup_rounds + run_plan.rounds):
        arguments = loop.setup()
        loop.target(*arguments)
        loop.teardown()
        check = loop.checks[-1] if loop.checks else None
        if check is not None and not check.passed and check.round == loop.units.first(loop.number):
            print(f"FAILED {check.describe()} keys {' '.join(check.keys)}", flush=True)
    if loop.error is not None:
        print(f"stopped: {loop.error}")
    ratios = np.array([a.worst_ratio or 0.0 for a in loop.checks])
    failed = sum(not a.passed for a in loop.checks)
    worst = sorted(loop.checks, key=lambda a: a.worst_ratio or 0.0, reverse=True)[:5]
    quantiles = np.quantile(ratios, [0.5, 0.9, 0.99, 0.999]) if len(ratios) else []
    print(
        f"{backend.name} {network.letter} ({network.latin}) B={args.batch} k={args.unit}: "
        f"{len(loop.checks)} units checked ({sum(a.rounds for a in loop.checks)} rounds), "
        f"{failed} failed; worst ratios "
        + ", ".join(f"{a.worst_ratio:.3f} ({a.subject}: {a.worst_array})" for a in worst)
        + "; quantiles 50/90/99/99.9 %: "
        + " ".join(f"{q:.3f}" for q in quantiles)
        + "; worst of each kind: "
        + ", ".join(f"{kind} {ratio:.3f}" for kind, ratio in sorted(WORST.items()))
        + f"; checks {loop.check_seconds:.0f} s of {time.monotonic() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
