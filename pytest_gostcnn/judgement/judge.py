"""The judge: a run's findings turned into its assessment, the one way the plugin, ``check``
and ``evaluate`` all judge a run.

The assessment is the compliance (standard.md §7.7) with its reasons for the run, each mode
and each test; each test's result with its reasons, comment (9.7) and designation; and each
evaluated mode's evaluation (9.8) with its comment, designation and reasons.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_gostcnn.performance.designations import designate_evaluation
from pytest_gostcnn.performance.evaluation import (
    Evaluation,
    Run,
    comment,
    evaluate,
    result_comment,
)
from pytest_gostcnn.performance.timing import Timing

from .compliance import Compliance, Findings, assess, counted


@dataclass(frozen=True)
class Assessment:
    """A run's results judged: compliance, each timing with its reasons and comment, each
    evaluated mode's evaluation."""

    compliance: Compliance
    timings: tuple[Timing, ...]
    evaluations: tuple[Evaluation, ...]


def judge(findings: Findings) -> Assessment:
    """The assessment of a run from what it found (standard.md §7.7, sections 9.7 and 9.8)."""
    compliance = assess(findings)
    timings = tuple(
        dataclasses.replace(
            timing,
            reasons=tuple(r.text for r in compliance.for_test(timing.latin, timing.mode)),
            comment=result_comment(findings.run),
            # A designation names the run's table set and image count.
            table_set=findings.table_set,
            requested_images=findings.images,
        )
        for timing in findings.timings
    )
    evaluations = _evaluations(
        findings.evaluated,
        timings,
        findings.run,
        compliance,
        findings.meets_image_count,
        findings.images,
    )
    return Assessment(compliance, timings, tuple(evaluations))


def _evaluations(
    modes: Iterable[str],
    timings: Iterable[Timing],
    run: Run,
    compliance: Compliance,
    meets_image_count: bool,
    images: int | None = None,
) -> list[Evaluation]:
    """Section 9.8 for each of ``modes`` over the results that count in that mode (not a
    test whose audit failed), with its comment, designation and reasons; ``images``: the
    ``--gost-images`` count, when it chose the rounds instead of a profile."""
    timings = list(timings)
    out = []
    for mode in modes:
        results = {t.latin: t.orp for t in timings if t.mode == mode and counted(t)}
        evaluation = evaluate(mode, results, run.system_peak or 0.0)
        reasons = compliance.for_evaluation(mode)
        designation = designate_evaluation(
            mode,
            run.dtype,
            run.batch,
            run.cells,
            meets_image_count,
            not reasons,
            run.table_set,
            images,
        )
        out.append(
            dataclasses.replace(
                evaluation,
                designation=designation,
                cells=run.cells,
                comment=tuple(comment(evaluation, run)),
                reasons=tuple(reason.text for reason in reasons),
                summary=reasons[0].short if reasons else "",
            )
        )
    return out
