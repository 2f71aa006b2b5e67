"""What timing the hand-over of a round's data costs an honest backend (docs/benchmarking.md,
"The round's data"): the seconds of ``to_device`` of a round's images (and, training, its
output residual) and of a segment's reload of the weights, each against the median timed
round it is now part of, measured in one process. Prints; asserts nothing.

    python benchmarks/handover_cost.py --backend numpy --batch 2 --rounds 9
"""

from __future__ import annotations

import argparse
import statistics
import time

from pytest_gostcnn.backend import load_backend_class
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.networks import __path__ as shipped
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.rounds import Rounds, TimedTest
from pytest_gostcnn.performance.training_data import SEGMENT_ROUNDS


def seconds(call, repeats: int) -> float:
    """The median of ``repeats`` timings of ``call()``, each ended by the backend's sync."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="numpy", help="a registered backend (numpy)")
    parser.add_argument("--batch", type=int, default=2, help="(2)")
    parser.add_argument("--rounds", type=int, default=9, help="timed rounds a test (9)")
    parser.add_argument("--networks", default="M,G,V,S,R,Sh", help="(all six analogs)")
    options = parser.parse_args()
    networks = load_networks(shipped[0])
    backend = load_backend_class(options.backend)("float32")
    print(f"{'network':8} {'mode':9} {'round ms':>9} {'hand-over ms':>12} {'share':>7} "
          f"{'reload ms':>9} {'a round':>8}")  # fmt: skip
    for latin in options.networks.split(","):
        network = networks[latin]
        for mode in ("inference", "training"):
            run_plan = Plan(None, options.rounds, 1, options.batch, options.rounds * options.batch)
            test = TimedTest(backend, network, mode, run_plan, seed=3, checked=False)
            loop = Rounds(test)
            rounds, handed = [], []
            for _ in range(run_plan.warmup_rounds + run_plan.rounds):
                arguments = loop.setup()
                started = time.perf_counter()
                loop.target(*arguments)
                rounds.append(time.perf_counter() - started)
                handed.append(seconds(lambda a=arguments: [backend.to_device(x) for x in a], 3))
                loop.teardown()
            round_seconds = statistics.median(rounds[run_plan.warmup_rounds :])
            hand_over = statistics.median(handed)
            reload = "-"
            per_round = "-"
            if mode == "training":
                weights = loop.host_weights
                load = seconds(lambda n=network, w=weights: backend.load_weights(n, w), 3)
                reload = f"{1e3 * load:.3f}"
                per_round = f"{100 * load / SEGMENT_ROUNDS / round_seconds:.2f} %"
            print(
                f"{latin:8} {mode:9} {1e3 * round_seconds:>9.2f} {1e3 * hand_over:>12.3f} "
                f"{100 * hand_over / round_seconds:>6.2f}% {reload:>9} {per_round:>8}"
            )


if __name__ == "__main__":
    main()
