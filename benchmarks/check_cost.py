"""What a full profile's training checks cost on this machine, per analog, under the design
before (a drawn segment of 16 rounds replayed from the drawn weights) and today's (a drawn
unit of k rounds replayed from the suite's copy of the weights), with the NumPy backend's
timed work beside them (docs/performance.md, "What the checks cost"). Prints; asserts
nothing.

Measured on this machine, per analog: one float64 training iteration with its error model
at ``--measure-batch`` (a check replays one per round; scaled by the batch, each image's
forward and backward being its own), the NumPy backend's training round and the suite's
copy of the weights and of an input residual at each of ``--measure-batches`` (beyond the
largest, its round and residual copy scaled by the batch). copy/round is the copies' share
of a timed round at the k they give. k at each batch follows from that copy and round
(``performance/kept.py``); the checks' count from the draw (``performance/checks.py``).

    python benchmarks/check_cost.py --batches 2,64,1024 --networks M,G,V,S,R,Sh
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance.replay import Replay
from pytest_gostcnn.machine.pool import reference_work
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.performance.checks import Units
from pytest_gostcnn.performance.images import ImageSet, residual
from pytest_gostcnn.performance.kept import KeptWeights, copy_share, unit_rounds
from pytest_gostcnn.performance.plan import plan
from pytest_gostcnn.performance.training_data import (
    RESIDUAL_SCALE,
    SEGMENT_ROUNDS,
    benchmark_weights,
)
from pytest_gostcnn.run.options import select_networks


def timed(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def replay_one(network, weights, images, out_residual):
    return lambda: Replay(network, "float32", weights).advance([(images, out_residual)])


def data(network, batch: int):
    images = ImageSet(network.input_shape, 2).batch(0, batch)
    return images, residual(2, (batch, *network.output_shape), RESIDUAL_SCALE)


def round_and_copy(backend, network, weights, batch: int, repeats: int) -> tuple[float, ...]:
    """The NumPy backend's training round at ``batch`` (hand-over, call, output read), the
    suite's copy of its weights and of its input residual, each the median of ``repeats``."""
    loaded = backend.load_weights(network, weights)
    images, out_residual = data(network, batch)
    result = None

    def one_round():
        nonlocal result
        result = backend.train(
            network, loaded, backend.to_device(images), backend.to_device(out_residual)
        )
        backend.to_host(result.output).copy()

    one_round()  # the first call's one-time costs
    seconds = timed(one_round, repeats)
    kept = KeptWeights(backend)
    copies = [kept.measure(loaded, result.input_residual) for _ in range(repeats)]
    return seconds, *(statistics.median(c) for c in zip(*copies, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", default="2,64,1024", help="projected (2,64,1024)")
    parser.add_argument("--networks", default="M,G,V,S,R,Sh", help="(all six analogs)")
    parser.add_argument("--measure-batch", type=int, default=2, help="the iteration's (2)")
    parser.add_argument("--measure-batches", default="2,64", help="rounds and copies (2,64)")
    parser.add_argument("--repeats", type=int, default=3, help="(3)")
    options = parser.parse_args()
    try:
        batches = [int(b) for b in options.batches.split(",")]
        measured = sorted(int(b) for b in options.measure_batches.split(","))
    except ValueError as exc:
        parser.error(f"--batches, --measure-batches: integers separated by commas ({exc})")
    if not all(1 <= b <= 1024 for b in [*batches, *measured, options.measure_batch]):
        parser.error("a batch is an integer from 1 to 1024")
    if options.repeats < 1:
        parser.error(f"--repeats {options.repeats}: at least 1")
    try:
        networks = select_networks(load_networks(), options.networks, "--networks")
    except ValueError as exc:
        parser.error(str(exc))
    backend = NumpyBackend("float32")
    print(
        f"{'network':8} {'B':>5} {'k':>3} {'copy/round':>10} {'round s':>8} {'timed work':>10} "
        f"{'checks before':>13} {'checks now':>10} {'now/before':>10} {'now/work':>8}"
    )
    for network in networks.values():
        weights = benchmark_weights(network, np.random.default_rng(0))
        measure = options.measure_batch
        images, out_residual = data(network, measure)
        with reference_work():
            iteration = timed(replay_one(network, weights, images, out_residual), options.repeats)
        rounds_at = {b: round_and_copy(backend, network, weights, b, options.repeats)
                     for b in measured}  # fmt: skip
        for batch in batches:
            known = max((b for b in measured if b <= batch), default=measured[0])
            round_seconds, weights_copy, residual_copy = rounds_at[known]
            scale = batch / known  # beyond the batches measured: the round and residual scaled
            round_seconds, residual_copy = round_seconds * scale, residual_copy * scale
            rounds = plan("full", batch).rounds
            k = unit_rounds(weights_copy, residual_copy, round_seconds, SEGMENT_ROUNDS)
            share = copy_share(weights_copy, residual_copy, round_seconds, k)
            one = iteration * batch / measure  # one round's float64 replay
            before = Units("training", rounds, SEGMENT_ROUNDS)
            now = Units("training", rounds, SEGMENT_ROUNDS, k)
            # Each checked unit replays its rounds: the units' chance times the rounds.
            checks_before = before.chance * rounds * one
            checks_now = now.chance * rounds * one
            work = rounds * round_seconds
            print(
                f"{network.letter} ({network.latin}) {batch:>5} {k:>3} "
                f"{100 * share:>9.2f}% {round_seconds:>8.3f} {duration(work):>10} "
                f"{duration(checks_before):>13} {duration(checks_now):>10} "
                f"{checks_now / checks_before:>10.3f} {checks_now / work:>8.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
