"""Section 8's training network item from two installs of the suite, in turn, pair by pair:
each in a fresh process, its seconds, CPU seconds, peak RSS and verdict, for each network
(docs/performance.md, "The suite's memory"). Prints; asserts nothing.

    python benchmarks/item_pair.py --old /path/to/old/.venv/bin/python --batch 16 --pairs 2

``--old`` and ``--new`` are Python interpreters that each have a version of the suite
installed (a virtual environment of another checkout, say); ``--new`` defaults to this one.
The order alternates from pair to pair, the old install first in the first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.run.options import select_networks

# What each interpreter runs: the item as the plugin runs it, under the suite's own setting.
ITEM = """
import json, resource, sys, time
from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance.verification import verify_network
from pytest_gostcnn.machine.pool import reference_work
from pytest_gostcnn.model.table_files import load_networks
latin, batch = sys.argv[1], int(sys.argv[2])
network, backend = load_networks()[latin], NumpyBackend("float32")
started, cpu = time.perf_counter(), time.process_time()
with reference_work():
    result = verify_network(backend, network, "training", batch, 0)
print(json.dumps({"verdict": result.verdict, "seconds": time.perf_counter() - started,
                  "cpu": time.process_time() - cpu,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def item(python: str, latin: str, batch: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:  # the install's package, not a checkout's
        try:
            done = subprocess.run(
                [python, "-c", ITEM, latin, str(batch)], cwd=folder, capture_output=True, text=True
            )
        except OSError as exc:
            sys.exit(f"error: cannot run {python}: {exc.strerror}")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        sys.exit(f"error: {python}, {latin} at B = {batch}, exited {done.returncode}: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="the other install's Python")
    parser.add_argument("--new", default=sys.executable, help="this install's (default)")
    parser.add_argument("--networks", default="M,G,V,S,R,Sh", help="analogs, as --gost-networks")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--pairs", type=int, default=1)
    args = parser.parse_args()
    if not 1 <= args.batch <= 1024:
        parser.error(f"--batch {args.batch}: an integer from 1 to 1024")
    if args.pairs < 1:
        parser.error(f"--pairs {args.pairs}: at least 1")
    for option, python in (("--old", args.old), ("--new", args.new)):
        if not os.path.isfile(python):
            parser.error(f"{option} {python}: not a file (a Python interpreter)")
    try:  # Latin or Cyrillic letters, as --gost-networks takes them
        latins = list(select_networks(load_networks(), args.networks, "--networks"))
    except ValueError as exc:
        parser.error(str(exc))
    print(f"{'pair':>4} {'install':7} {'network':7} {'s':>7} {'CPU s':>7} {'peak RSS':>9} verdict")
    for pair in range(1, args.pairs + 1):
        for latin in latins:
            order = [("old", args.old), ("new", args.new)]
            for name, python in order if pair % 2 else order[::-1]:
                got = item(python, latin, args.batch)
                print(
                    f"{pair:>4} {name:7} {latin:7} {got['seconds']:>7.1f} {got['cpu']:>7.1f} "
                    f"{got['rss'] / 1e9:>7.2f}GB {got['verdict']}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
