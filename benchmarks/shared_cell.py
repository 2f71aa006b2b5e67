"""What the shared-cell measure (``performance/contention.py``) says of a backend that
computes and of one whose thread sleeps in its rounds, alone and beside busy loops:
docs/benchmarking.md, "A shared cell".

Runs the suite on the NumPy backend and on the same backend with a sleep of ``--sleep``
seconds after each convolution's forward step (a GPU backend's host thread, which sleeps
while its device works), each once on the machine as it is and once beside ``--busy``
processes that spin; prints each test's counts and both measures: the threads' waiting over
their ready time (``wait_share``, the measure before) and the most one thread waited over
the rounds' wall time (``delay_share``, the one judged)::

    python benchmarks/shared_cell.py -- --gost-networks=M,Sh --gost-mode=inference \\
        -k test_benchmark

The arguments after ``--`` are given to every run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_gostcnn.performance.contention import Contention
from pytest_gostcnn.reports.load import read_report, timings

SLEEPS = '''"""The NumPy backend, a sleep of {sleep} s after each convolution's forward step."""
import time

from pytest_gostcnn.backends.numpy import NumpyBackend


class Sleeps(NumpyBackend):
    name = "sleeps"

    def forward(self, layer, inputs, weights):
        outputs = super().forward(layer, inputs, weights)
        if layer.type.name == "conv":
            time.sleep({sleep})
        return outputs
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sleep", type=float, default=0.002, help="seconds per convolution")
    parser.add_argument("--busy", type=int, default=2, help="spinning processes beside")
    parser.add_argument("pytest_args", nargs="*", help="given to every run (after --)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="shared_cell_"))
    (folder / "sleeps.py").write_text(SLEEPS.format(sleep=args.sleep), encoding="utf-8")
    print("backend, beside: test: wait_share (before), delay_share (now), CPU share, load")
    for busy in (0, args.busy):
        for backend in ("numpy", "sleeps:Sleeps"):
            loops = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(busy)]
            try:
                report = _run(folder, backend, busy, args.pytest_args)
            finally:
                for loop in loops:
                    loop.kill()
                    loop.wait()
            for test, contention in _contentions(report):
                print(f"{backend}, {busy} busy: {test}: {_measures(contention)}", flush=True)
    return 0


def _run(folder: Path, backend: str, busy: int, pytest_args: list[str]) -> Path:
    path = folder / f"{backend.partition(':')[0]}-{busy}.json"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += [f"--gost-backend={backend}", f"--gost-report={path}", *pytest_args]
    subprocess.run(command, cwd=folder, capture_output=True, text=True, env=dict(os.environ))
    return path


def _contentions(report: Path):
    for timing in timings(read_report(report)).values():
        for cell in timing.cells:
            if cell.contention is not None:
                yield f"{timing.latin} {timing.mode}", cell.contention


def _measures(c: Contention) -> str:
    def percent(share: float | None) -> str:
        return "-" if share is None else f"{100 * share:.1f} %"

    return (
        f"{percent(c.wait_share)}, {percent(c.delay_share)}"
        f"{' (shared)' if c.shared else ''}, CPU {percent(c.cpu_share)} of {c.cores}, "
        f"load {c.load_average}"
    )


if __name__ == "__main__":
    sys.exit(main())
