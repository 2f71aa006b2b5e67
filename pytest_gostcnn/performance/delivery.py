"""What a timed round delivers (docs/benchmarking.md, "One round"): its results read to the
host and copied inside the timed region. The copies are the suite's: a check compares
them and nothing read later (standard.md §7.7), and each round's output is named by a
fingerprint of its bytes.
"""

from __future__ import annotations

import hashlib

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.model import executor
from pytest_gostcnn.model.dtypes import host_array_problem, master_dtype
from pytest_gostcnn.model.network import Network


def delivered(result: executor.TrainingResult, weights: dict, segment_end: bool) -> list:
    """What a training round delivers: its output map, and at a segment's last round every
    updated weight array and the input residual, which force the segment's backward,
    gradient and update steps (each round's forward reads the update before it)."""
    if not segment_end:
        return [result.output]
    arrays = [a for ws in weights.values() for a in ws.values()]
    return [result.output, *arrays, result.input_residual]


def deliver(backend: Backend, arrays: list) -> list[np.ndarray]:
    """Read a round's results to the host and copy them, inside the timed region: a round
    ends when its results are delivered (standard.md §7, third release), so work a backend
    left queued or lazy is done, and timed, here; the copies hold the bytes as they were
    then, whatever the backend does to its own arrays later. What is not a NumPy array is
    kept as ``to_host`` gave it, for ``delivery_problem`` to name after the round."""
    copies = []
    for array in arrays:
        host = backend.to_host(array)
        copies.append(np.array(host, order="C") if isinstance(host, np.ndarray) else host)
    return copies


def delivery_problem(
    copies: list[np.ndarray],
    network: Network,
    batch: int,
    dtype: str,
    weight_shapes: list[tuple[int, str, tuple[int, ...]]],
) -> str | None:
    """Why a round's delivered ``copies`` are not its arrays (checked after the round): the
    output map, then at a segment's end each weight array ((row, name, shape), in the order
    delivered), kept in ``master_dtype``, and the input residual."""
    expected = [("output", (batch, *network.output_shape), dtype)]
    if len(copies) > 1:
        kept = master_dtype(dtype)
        expected += [(f"row {n} {name}", shape, kept) for n, name, shape in weight_shapes]
        expected.append(("input residual", (batch, *network.input_shape), dtype))
    for copy, (name, shape, kept) in zip(copies, expected, strict=True):
        problem = host_array_problem(copy, shape, kept)
        if problem is not None:
            return f"its {name}: {problem}"
    return None


def fingerprint(output: np.ndarray) -> str:
    """A round's delivered output map named by 64 bits of a hash of its bytes (BLAKE2b):
    two rounds on different images that deliver the same bytes gave a previous answer."""
    return hashlib.blake2b(output, digest_size=8).hexdigest()
