"""What a full profile's checks cost on this machine, per analog (docs/benchmarking.md, "What
the checks cost"): one inference check (one image against its float64 reference) and one
float64 training iteration with its error model (a checked segment replays K of them) timed
on the NumPy reference, then multiplied by the checks a full profile's draw makes on
average at each batch. Training's iteration is measured at ``--measure-batch`` and scaled
by the batch (each image's forward and backward is its own). Prints; asserts nothing.

    python benchmarks/check_cost.py --batches 2,64,1024
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance.replay import Replay
from pytest_gostcnn.conformance.verification import verify_round
from pytest_gostcnn.machine.pool import reference_work
from pytest_gostcnn.model.network import load_networks
from pytest_gostcnn.networks import __path__ as shipped
from pytest_gostcnn.performance.checks import check_chance, check_units
from pytest_gostcnn.performance.images import ImageSet, residual
from pytest_gostcnn.performance.plan import plan
from pytest_gostcnn.performance.training_data import (
    RESIDUAL_SCALE,
    SEGMENT_ROUNDS,
    benchmark_weights,
)


def timed(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def check_one_image(backend, network, weights, image, output):
    return lambda: verify_round(backend, network, weights, image, output)


def replay_one(network, weights, images, out_residual):
    return lambda: Replay(network, "float32", weights).advance([(images, out_residual)])


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", default="2,64,1024", help="(2,64,1024)")
    parser.add_argument("--networks", default="M,G,V,S,R,Sh", help="(all six analogs)")
    parser.add_argument("--measure-batch", type=int, default=2, help="(2)")
    parser.add_argument("--repeats", type=int, default=2, help="(2)")
    options = parser.parse_args()
    batches = [int(b) for b in options.batches.split(",")]
    networks = load_networks(shipped[0])
    backend = NumpyBackend("float32")
    head = " ".join(f"{f'B={b} inf':>10} {f'B={b} train':>11}" for b in batches)
    print(f"{'network':8} {'image s':>8} {'iteration s':>11} {head}")
    for latin in options.networks.split(","):
        network = networks[latin]
        weights = benchmark_weights(network, np.random.default_rng(0))
        image = ImageSet(network.input_shape, 1).batch(0, 1)
        output = backend.infer(network, backend.load_weights(network, weights),
                               backend.to_device(image))  # fmt: skip
        measure = options.measure_batch
        images = ImageSet(network.input_shape, 2).batch(0, measure)
        out_residual = residual(2, (measure, *network.output_shape), RESIDUAL_SCALE)
        with reference_work():
            one_image = timed(check_one_image(backend, network, weights, image, output),
                              options.repeats)  # fmt: skip
            iteration = timed(replay_one(network, weights, images, out_residual), options.repeats)
        cells = []
        for batch in batches:
            rounds = plan("full", batch).rounds
            inference = check_chance("inference", rounds) * rounds * one_image
            segments = check_units("training", rounds, SEGMENT_ROUNDS)
            training = check_chance("training", segments) * rounds * iteration * batch / measure
            cells.append(f"{duration(inference):>10} {duration(training):>11}")
        print(f"{latin:8} {one_image:>8.3f} {iteration:>11.3f} {' '.join(cells)}")


if __name__ == "__main__":
    main()
