"""What the suite's own float64 work costs: for each network and batch, one plain reference
training iteration and one check replay iteration (the reference with its error model,
``conformance/replay.py``), each in GMAC/s (the network's training MACs per image x B over
the time) and as a share of this machine's float64 GEMM rate measured in the same process;
with ``--sliced``, the reference with its error model (what a network item compares against
and a check replays) a slice of the batch at a time within ``--memory``, each in a process
of its own: its seconds, seconds an image, slices and peak RSS, against the whole batch at
once (``--memory 1TB``: one slice); with ``--items``, section 8's training network item on
the NumPy backend and that backend's training round alone, each in a process of its own:
seconds and peak RSS, the suite's share the difference; and, with ``--quick-run``, the
README's quick run: its wall seconds against its timed rounds' and the suite's own, by kind
(the report's ``cells[].suite_seconds``).

It measures and prints; it asserts nothing. Run it on a quiet machine::

    python benchmarks/suite_cost.py                         # the analogs at B = 2 and 16
    python benchmarks/suite_cost.py --tables canonical --batches 16 --networks R,Sh
    python benchmarks/suite_cost.py --quick-run --networks none
    nice -n 19 python benchmarks/suite_cost.py --sliced --batches 16,64 --memory 2GB,1TB
    nice -n 19 python benchmarks/suite_cost.py --items --batches 64
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

import numpy as np

from pytest_gostcnn.conformance.replay import Replay
from pytest_gostcnn.machine import pool
from pytest_gostcnn.machine.pool import reference_work
from pytest_gostcnn.model import executor
from pytest_gostcnn.model.complexity import training_macs
from pytest_gostcnn.model.memory import parse_size, size_text
from pytest_gostcnn.model.network import LATIN
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.performance.training_data import RESIDUAL_SCALE, benchmark_weights
from pytest_gostcnn.reference import ReferenceKernels

GEMM_SIZE = 2048


def gemm_rate(repeats: int = 5) -> float:
    """The machine's float64 GEMM rate in MAC/s: NumPy's BLAS with its own threads, best of
    ``repeats`` products of two ``GEMM_SIZE`` square matrices."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, GEMM_SIZE, GEMM_SIZE))
    a @ b  # warm: BLAS's threads started, pages touched
    best = min(_seconds(lambda: a @ b) for _ in range(repeats))
    return GEMM_SIZE**3 / best


def _seconds(work) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def iterations(network, batch: int, repeats: int) -> tuple[float, float]:
    """(plain, replay): the best seconds of ``repeats`` of each, as the suite runs them
    (BLAS on one thread, the products split over ``pool.threads()`` threads), after one
    untimed iteration of each (a cold first one touches its memory: about twice as long)."""
    rng = np.random.default_rng(0)
    drawn = benchmark_weights(network, rng)
    image = rng.uniform(-127, 128, (batch, *network.input_shape))
    residual = rng.uniform(-1, 1, (batch, *network.output_shape)) * RESIDUAL_SCALE
    plain, replay = [], []
    with reference_work():
        for _ in range(repeats + 1):
            weights = {n: {k: a.copy() for k, a in ws.items()} for n, ws in drawn.items()}
            plain.append(
                _seconds(
                    lambda w=weights: executor.train(
                        network, ReferenceKernels(), w, image, residual
                    )
                )
            )
            replayed = Replay(network, "float32", drawn)
            replay.append(_seconds(lambda r=replayed: r.advance([(image, residual)])))
    return min(plain[1:]), min(replay[1:])


SLICED = """
import json, resource, sys, time
import numpy as np
from pytest_gostcnn.conformance.error_kernels import ErrorModelKernels
from pytest_gostcnn.conformance.sliced import reference_training
from pytest_gostcnn.machine.pool import reference_work
from pytest_gostcnn.model.data import draw_input, draw_out_residual, draw_slices, draw_weights
from pytest_gostcnn.model.dtypes import PRECISIONS
from pytest_gostcnn.model.memory import MemoryBoundError, batch_slices
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.reference.library import ReferenceLibrary
tables, latin, batch, memory = sys.argv[1] or None, sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
memory = memory or None  # 0: the suite's default
network = load_networks(tables)[latin]
model = ErrorModelKernels(PRECISIONS["float32"], library=ReferenceLibrary(memory=memory))
rng = np.random.default_rng(0)
weights = {n: {k: model.bound(a) for k, a in ws.items()}
           for n, ws in draw_weights(network, rng).items()}
image = draw_slices(draw_input, network, batch, rng)
residual = draw_slices(draw_out_residual, network, batch, rng)
try:
    slices = len(batch_slices(network, batch, memory, error_model=True))
except MemoryBoundError as exc:
    print(json.dumps({"error": str(exc)}))
    sys.exit(0)
with reference_work():
    started, cpu = time.perf_counter(), time.process_time()
    reference_training(network, model, weights, image, residual, keep=None)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "slices": slices, "peak_rss": rss}))
"""

# Section 8's training network item (``item``) or the NumPy backend's own training round
# on its draws (``backend``), the backend's float32 maps included in both.
ITEM = """
import json, resource, sys, time
import numpy as np
from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance.verification import verify_network
from pytest_gostcnn.machine.pool import reference_work
from pytest_gostcnn.model.data import draw_input, draw_out_residual, draw_weights
from pytest_gostcnn.model.memory import batch_slices, results_held
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.reference.library import ReferenceLibrary
tables, latin, batch, memory, what = sys.argv[1] or None, sys.argv[2], int(sys.argv[3]), \
    int(sys.argv[4]) or None, sys.argv[5]
network, backend = load_networks(tables)[latin], NumpyBackend("float32")
held = results_held(network, batch, training=True)
row = {"held": held, "slices": len(batch_slices(network, batch, memory, True, held))}
started, cpu = time.perf_counter(), time.process_time()
if what == "backend":
    rng = np.random.default_rng(0)
    loaded = backend.load_weights(network, draw_weights(network, rng))
    image, residual = draw_input(network, batch, rng), draw_out_residual(network, batch, rng)
    backend.train(network, loaded, backend.to_device(image), backend.to_device(residual))
else:
    with reference_work():
        result = verify_network(backend, network, "training", batch, 0,
                                library=ReferenceLibrary(memory=memory))
    row["verdict"] = result.verdict
row["seconds"], row["cpu_seconds"] = time.perf_counter() - started, time.process_time() - cpu
row["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(row))
"""


def sliced(tables: str | None, latin: str, batch: int, memory: int, script: str = SLICED, *more):
    """``script`` (``SLICED``: the reference with its error model over ``batch`` images
    within ``memory`` bytes, as a check's replay runs it, its draws read a slice at a time
    and its output and input residual not kept) in a fresh process: its figures, the
    process's peak RSS among them (the interpreter and NumPy included)."""
    command = [sys.executable, "-c", script, tables or "", latin, str(batch), str(memory), *more]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def items_table(networks: dict, chosen: list, tables: str | None, batches, memory: int) -> list:
    """Section 8's training network item on the NumPy backend and that backend's own
    training round alone, each in a fresh process, for each network and batch."""
    rows = []
    print(f"{'network':10} {'B':>5} {'held':>7} {'slices':>6} {'item s':>7} {'CPU s':>7} "
          f"{'item RSS':>9} {'verdict':>11} {'round s':>7} {'round RSS':>9} "
          f"{'load':>5}")  # fmt: skip
    for latin in chosen:
        for batch in batches:
            item = sliced(tables, latin, batch, memory, ITEM, "item")
            alone = sliced(tables, latin, batch, memory, ITEM, "backend")
            load = os.getloadavg()[0]
            rows.append({"network": latin, "batch": batch, "item": item, "backend": alone})
            rows[-1]["load"] = load
            print(
                f"{networks[latin].letter + ' (' + latin + ')':10} {batch:>5} "
                f"{item['held'] / 1e9:>6.2f}G {item['slices']:>6} {item['seconds']:>7.1f} "
                f"{item['cpu_seconds']:>7.1f} {item['peak_rss'] / 1e9:>8.2f}G "
                f"{item['verdict']:>11} {alone['seconds']:>7.1f} {alone['peak_rss'] / 1e9:>8.2f}G "
                f"{load:>5.1f}",
                flush=True,
            )
    return rows


def _bound_text(memory: int) -> str:
    return size_text(memory) if memory else "default"


def sliced_table(networks: dict, chosen: list, tables: str | None, batches, memories) -> list:
    """``sliced`` for each network, batch and bound, printed a line each."""
    rows = []
    print(f"{'network':10} {'B':>5} {'bound':>6} {'slices':>6} {'s':>8} {'s/image':>8} "
          f"{'CPU s/im':>8} {'peak RSS':>9} {'load':>5}")  # fmt: skip
    for latin in chosen:
        for batch in batches:
            for memory in memories:
                got = sliced(tables, latin, batch, memory)
                got["load"] = os.getloadavg()[0]
                rows.append({"network": latin, "batch": batch, "memory": memory, **got})
                name = f"{networks[latin].letter} ({latin})"
                if "error" in got:
                    print(f"{name:10} {batch:>5} {_bound_text(memory):>6} {got['error']}")
                    continue
                print(
                    f"{name:10} {batch:>5} {_bound_text(memory):>6} {got['slices']:>6} "
                    f"{got['seconds']:>8.1f} {got['seconds'] / batch:>8.3f} "
                    f"{got['cpu_seconds'] / batch:>8.3f} {got['peak_rss'] / 1e9:>7.2f}GB "
                    f"{got['load']:>5.1f}",
                    flush=True,
                )
    return rows


def quick_run(networks: str | None) -> dict:
    """The README's quick run (``pytest --gost-backend=numpy``) in an empty folder, with a
    report: its wall seconds, its timed rounds' seconds and the suite's own by kind."""
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
        command += ["--gost-backend=numpy", "--gost-report=report.json"]
        if networks:
            command.append(f"--gost-networks={networks}")
        started = time.perf_counter()
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
        wall = time.perf_counter() - started
        report = json.loads((Path(folder) / "report.json").read_text(encoding="utf-8"))
    timed = sum(sum(c["round_seconds"]) for t in report["benchmarks"] for c in t["cells"][:1])
    return {
        "exit_status": done.returncode,
        "wall_seconds": wall,
        "timed_seconds": timed,
        "suite_seconds": report["cells"][0].get("suite_seconds"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--tables", default=None, help="a shipped set or a folder (analogs)")
    parser.add_argument("--networks", default="all", help="Latin ids, 'all' or 'none'")
    parser.add_argument("--batches", default="2,16")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick-run", action="store_true", help="time the README's run too")
    parser.add_argument(
        "--sliced", action="store_true", help="the error model's iteration a slice at a time"
    )
    parser.add_argument(
        "--items", action="store_true", help="section 8's training items and the backend's round"
    )
    parser.add_argument(
        "--memory", default="2GB", help="bounds, comma-separated ('default': the suite's)"
    )
    parser.add_argument("--quick-networks", default=None, help="--gost-networks for it")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument(
        "--threads", type=int, default=None, help="the reference's threads (default: the cell's)"
    )
    args = parser.parse_args(argv)
    if args.threads is not None:
        pool.threads = lambda: args.threads
    networks = load_networks(args.tables)
    chosen = {"all": list(LATIN.values()), "none": []}.get(args.networks, args.networks.split(","))
    unknown = [latin for latin in chosen if latin not in networks]
    if unknown:
        parser.error(f"--networks: unknown {', '.join(unknown)}; known: {', '.join(networks)}")
    batches = [int(b) for b in args.batches.split(",")]
    if args.sliced or args.items:
        memories = [0 if m == "default" else parse_size(m) for m in args.memory.split(",")]
        if args.items:
            rows = items_table(networks, chosen, args.tables, batches, memories[0])
            print("held: the item's results kept whole, in the bound; RSS: the process's peak")
        else:
            rows = sliced_table(networks, chosen, args.tables, batches, memories)
            print(
                "peak RSS: the process's, the interpreter included; bound: --memory; CPU: "
                "the process's, its threads together; load: the 1-minute load average after"
            )
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
        return 0
    rate = gemm_rate()
    print(f"float64 GEMM {GEMM_SIZE}^3 (NumPy's BLAS, its own threads): {rate / 1e9:.1f} GMAC/s")
    print(f"the suite's reference threads: {pool.threads()} (BLAS one thread each)")
    rows = []
    print(f"{'network':10} {'B':>3} {'GMAC':>7} {'plain s':>8} {'GMAC/s':>7} {'share':>6} "
          f"{'replay s':>9} {'GMAC/s':>7} {'share':>6}")  # fmt: skip
    for latin in chosen:
        for batch in (int(b) for b in args.batches.split(",")):
            network = networks[latin]
            macs = training_macs(network) * batch
            plain, replay = iterations(network, batch, args.repeats)
            row = {
                "network": latin,
                "batch": batch,
                "macs": macs,
                "plain_seconds": plain,
                "replay_seconds": replay,
                "plain_share": macs / plain / rate,
                "replay_share": macs / replay / rate,
            }
            rows.append(row)
            print(
                f"{network.letter + ' (' + latin + ')':10} {batch:>3} {macs / 1e9:>7.2f} "
                f"{plain:>8.3f} {macs / plain / 1e9:>7.2f} {100 * row['plain_share']:>5.1f}% "
                f"{replay:>9.3f} {macs / replay / 1e9:>7.2f} {100 * row['replay_share']:>5.1f}%"
            )
    if rows:
        print(
            "GMAC: the network's training multiply-adds an image times B; GMAC/s: those over "
            "the iteration's seconds (best of --repeats); share: of the GEMM rate above"
        )
    result = {"gemm_macs_per_second": rate, "threads": pool.threads(), "iterations": rows}
    if args.quick_run:
        run = quick_run(args.quick_networks)
        result["quick_run"] = run
        own = run["suite_seconds"] or {}
        print(
            f"quick run: {run['wall_seconds']:.1f} s wall, {run['timed_seconds']:.1f} s of timed "
            f"rounds, the suite's own {sum(own.values()):.1f} s ("
            + ", ".join(f"{kind} {seconds:.1f} s" for kind, seconds in own.items())
            + f"); exit status {run['exit_status']}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
