"""What a section 8 item does: verify a layer step or a network (``timed_items.py`` times
one).

The suite (``suite/conformance.py``) calls these with the plugin's session; the arithmetic
lives in ``conformance/verification.py``.
"""

from __future__ import annotations

import math
import time
import zlib

import numpy as np
import pytest

from pytest_gostcnn.conformance.layer_cases import LayerCase
from pytest_gostcnn.conformance.verification import (
    LayerData,
    Verification,
    prepare_layer,
    verify_layer,
    verify_network,
)
from pytest_gostcnn.machine.pool import reference_work
from pytest_gostcnn.performance.timing import macs_per_image
from pytest_gostcnn.run.resolution import case_steps, layer_item_id, layer_params

from .session import GostSession


def network_id(batch: int, latin: str, mode: str) -> str:
    return f"{latin}-{mode}-B{batch}"


def _data_id(case: LayerCase, dtype: str) -> str:
    """A layer case's id without its step: the steps of one case share its data."""
    return f"{case.layer.type.name}-{case.tag}-{dtype}"


def parametrize(session: GostSession, metafunc: pytest.Metafunc) -> None:
    """The suite's items: the steps of every small layer case and of every distinct layer
    of the selected networks at its own shape, every network in every mode."""
    wanted = {"gost_layer_case", "gost_network_case", "gost_benchmark_case"} & set(
        metafunc.fixturenames
    )
    if not wanted:
        return
    options, networks = session.options, session.resolved.networks
    if "gost_layer_case" in wanted:
        params = layer_params(options, networks)
        ids = [layer_item_id(c, step, options.dtype) for c, step in params]
        metafunc.parametrize("gost_layer_case", params, ids=ids)
    for name in ("gost_network_case", "gost_benchmark_case"):
        if name in wanted:
            params = [(latin, mode) for latin in networks for mode in options.modes]
            ids = [network_id(options.batch, latin, mode) for latin, mode in params]
            metafunc.parametrize(name, params, ids=ids)


def case_seed(seed: int, test_id: str) -> int:
    """The seed of one test's data: the session seed and the test's id, nothing else."""
    return int(np.random.SeedSequence([seed, zlib.crc32(test_id.encode())]).generate_state(1)[0])


def run_layer_case(session: GostSession, case: tuple[LayerCase, str], node: pytest.Item) -> None:
    layer_case, step = case
    options, test_id = session.options, node.callspec.id
    prepare = None
    if layer_case.network_shape:  # large: the case's steps share one draw and reference
        prepare = _shared_data(session, layer_case)
    started = time.monotonic()
    with reference_work():  # the float64 reference, sized to never collapse
        result = verify_layer(
            session.resolved.backend,
            layer_case.layer,
            step,
            options.batch,
            case_seed(options.seed, test_id),
            subject=test_id,
            threshold=options.rmse_threshold,
            draw_input=layer_case.draw_input,
            prepare=prepare,
            saturating=layer_case.saturating,
            library=session.resolved.reference,
        )
    session.results.suite_seconds.add("layer_verification", time.monotonic() - started)
    result.rows = layer_case.rows
    session.results.verified.layers.append(result)
    record_verdict(node, result)
    if result.failed:
        _fail(options.seed, result, session.rerun(f"test_layer and {test_id}"))


def _shared_data(session: GostSession, case: LayerCase):
    """A ``prepare`` for ``verify_layer`` that draws the case's data and computes its
    reference through its last step once, for all its steps; only the newest is kept."""
    options = session.options
    data_id = _data_id(case, options.dtype)

    def prepare() -> LayerData:
        kept = session.results.verified.layer_data
        if data_id not in kept:
            kept.clear()  # one case at a time: network shapes are large
            kept[data_id] = prepare_layer(
                case.layer,
                case_steps(options, case)[-1],
                options.batch,
                case_seed(options.seed, data_id),
                options.dtype,
                case.draw_input,
                library=session.resolved.reference,
            )
        return kept[data_id]

    return prepare


def run_network_case(session: GostSession, case: tuple[str, str], node: pytest.Item) -> None:
    latin, mode = case
    result = verified(session, latin, mode)
    record_verdict(node, result)
    if result.failed:
        command = session.rerun("test_network", networks=latin, mode=mode)
        _fail(session.options.seed, result, command)


def verified(session: GostSession, latin: str, mode: str) -> Verification:
    """This session's verification of a network in a mode, run now if it has not been."""
    options, results = session.options, session.results
    if (latin, mode) not in results.verified.networks:
        network = session.resolved.networks[latin]
        started = time.monotonic()
        with reference_work():
            results.verified.networks[(latin, mode)] = verify_network(
                session.resolved.backend,
                network,
                mode,
                options.batch,
                case_seed(options.seed, network_id(options.batch, latin, mode)),
                options.rmse_threshold,
                options.weights,
                library=session.resolved.reference,
            )
        seconds = time.monotonic() - started
        results.suite_seconds.add("network_verification", seconds)
        if results.selection.estimate is not None:  # the float64 iterations a check runs, as fast
            results.selection.estimate.verified(
                seconds, macs_per_image(network, mode) * options.batch
            )
    return results.verified.networks[(latin, mode)]


def record_verdict(node: pytest.Item, result: Verification) -> None:
    """The verdict and the worst СКО/СКОП as the item's properties (JUnit XML shows them)."""
    worst = result.worst
    ratio = None if worst is None or math.isinf(worst.ratio) else worst.ratio
    node.user_properties += [
        ("gost_verdict", result.verdict),
        ("gost_worst_rmse_ratio", "-" if ratio is None else f"{ratio:.3g}"),
        ("gost_worst_array", worst.name if worst else "-"),
    ]


def _fail(seed: int, result: Verification, command: str) -> None:
    lines = [f"{result.subject}: {result.verdict}", f"first failure: {result.first_failure}"]
    failing = [c for c in result.checks if not c.passed]
    if len(failing) > 1:
        lines.append(f"{len(failing)} of {len(result.checks)} arrays failed; the worst:")
        lines += [f"  {c.describe()}" for c in sorted(failing, key=lambda c: -c.ratio)[:5]]
    lines += [f"seed: --gost-seed={seed}", f"rerun: {command}"]
    pytest.fail("\n".join(lines), pytrace=False)
