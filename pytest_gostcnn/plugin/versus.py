"""The paired gate's side of a benchmark item (``--gost-versus``): the baseline backend
verified on the test's network, its rounds set beside the candidate's, and the test's
verdict once both have run (``reports/paired.py``; docs/benchmarking.md, "The paired
gate")."""

from __future__ import annotations

import dataclasses
import time

from pytest_gostcnn.backend import backend_label
from pytest_gostcnn.conformance.verification import verify_network
from pytest_gostcnn.machine.pool import reference_work
from pytest_gostcnn.performance import loop
from pytest_gostcnn.performance.record import Record
from pytest_gostcnn.performance.rounds import Rounds
from pytest_gostcnn.performance.timed_test import TimedTest
from pytest_gostcnn.performance.timing import Timing
from pytest_gostcnn.reports.paired import LEVEL, Verdict, decide, pair_seconds, paired

from .session import GostSession


def baseline_rounds(
    session: GostSession, test: TimedTest, seed: int
) -> tuple[Rounds | None, str | None]:
    """The baseline backend's rounds of ``test``, once it verified the test's network in
    its mode on ``seed``'s data as the candidate did (section 8); else None and why the
    test is not compared."""
    options, resolved, results = session.options, session.resolved, session.results
    key = (test.network.latin, test.mode)
    work = results.suite_seconds
    started = time.monotonic()
    try:
        if key not in results.versus.networks:
            with reference_work():
                results.versus.networks[key] = verify_network(
                    resolved.versus,
                    test.network,
                    test.mode,
                    options.batch,
                    seed,
                    options.rmse_threshold,
                    options.weights,
                    library=resolved.reference,
                )
        verification = results.versus.networks[key]
        if verification.failed:
            return None, (
                f"the baseline {named(session)} failed section 8 on {verification.subject}: "
                f"{verification.first_failure}"
            )
        # Its own draws and checks, its rounds' data keys its candidate's (``loop.run``).
        return loop.prepare(dataclasses.replace(test, backend=resolved.versus)), None
    except Exception as exc:  # the baseline's failure: the candidate is timed alone
        return None, (
            f"the baseline {named(session)} raised {type(exc).__name__}: {exc} while "
            "verifying or loading the weights"
        )
    finally:
        work.add("versus", time.monotonic() - started)


def verdict(
    session: GostSession,
    timing: Timing,
    record: Record,
    why_not: str | None,
) -> Verdict:
    """The test's verdict against the baseline, given when it ends (Holm over the run's
    benchmark tests, those not yet timed counted as not significant), kept in the run's
    results."""
    results, options = session.results, session.options
    why = _not_compared(session, timing, record, why_not)
    kept = {} if record.pairs is None else _seconds(record)
    if why is not None:
        verdict_now = Verdict(timing.name, None, not_compared=why, **kept)
    else:
        earlier = [v.paired for v in results.versus.verdicts.values() if v.paired is not None]
        tests = max(len(results.selection.benchmarks), len(results.versus.verdicts) + 1)
        now = paired(
            timing.name,
            kept["candidate_seconds"],
            kept["baseline_seconds"],
            kept["candidate_first"],
            options.compare_fail,
            LEVEL / tests,
        )
        verdict_now = decide(earlier, now, tests, kept)
    results.versus.verdicts[(timing.latin, timing.mode)] = verdict_now
    return verdict_now


def _not_compared(
    session: GostSession, timing: Timing, record: Record, why_not: str | None
) -> str | None:
    """Why the test's pairs cannot be judged; None when they can."""
    pairs = record.pairs
    if pairs is None:
        return why_not or "no pair of rounds was timed"
    if pairs.baseline_error is not None:
        return f"the baseline {named(session)} failed in its rounds: {pairs.baseline_error}"
    if pairs.baseline_failed is not None:
        check = pairs.baseline_failed
        return f"the baseline's check of timed {check.subject} failed ({check.verdict})"
    if record.error is not None or timing.failed_checks:
        return "the candidate's rounds are not a result (see the test's failure)"
    if pairs.pairs == 0:
        return "no pair of rounds was timed"
    return None


def _seconds(record: Record) -> dict:
    """The pairs' seconds while both backends ran."""
    pairs = record.pairs
    n = pairs.pairs
    return pair_seconds(
        record.seconds_now[:n], pairs.baseline_seconds[:n], pairs.candidate_first[:n]
    )


def named(session: GostSession) -> str:
    """The baseline backend as the summary names it: its declared name and version, and
    the ``--gost-versus`` it was given as where that differs (``sleepy 1.0 (base::m:C)``)."""
    backend = type(session.resolved.versus)
    return backend_label(backend.name, session.options.versus, backend.version)
