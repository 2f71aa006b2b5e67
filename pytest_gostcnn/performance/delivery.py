"""What a timed round delivers (docs/benchmarking.md, "One round"): its results read to the
host and copied inside the timed region. The copies are the suite's: a check compares
them and nothing read later (standard.md §7.7), and each round's output is named by a
fingerprint of its bytes.
"""

from __future__ import annotations

import hashlib

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.model.dtypes import host_array_problem
from pytest_gostcnn.model.network import Network


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
    copies: list[np.ndarray], network: Network, batch: int, dtype: str
) -> str | None:
    """Why a round's delivered ``copies`` are not its output map (checked after the round):
    training forces its other steps through the weights and input residual the suite keeps
    (``kept.py``)."""
    (copy,) = copies
    problem = host_array_problem(copy, (batch, *network.output_shape), dtype)
    return None if problem is None else f"its output: {problem}"


def fingerprint(output: np.ndarray) -> str:
    """A round's delivered output map named by 64 bits of a hash of its bytes (BLAKE2b):
    two rounds on different images that deliver the same bytes gave a previous answer."""
    return hashlib.blake2b(output, digest_size=8).hexdigest()
