"""The judge: a run's findings turned into its judgement, the one way the plugin, ``check``
and ``evaluate`` all judge a run, and the report's fields that say it.

Every caller takes one road: report -> ``findings`` -> ``judge`` -> ``judged_fields`` ->
report. The judgement is the compliance (standard.md §7.7) with its reasons for the run,
each mode and each test; each test's result with its reasons, comment (9.7) and
designation; and each evaluated mode's evaluation (9.8) with its comment, designation and
reasons.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_gostcnn.performance.timing import Timing

from .compliance import Compliance, Findings, assess, meets_image_count
from .evaluation import (
    Evaluation,
    Particulars,
    comment,
    designate_evaluation,
    evaluate,
    result_comment,
)
from .result import counted


@dataclass(frozen=True)
class Judgement:
    """A run's results judged: compliance, each timing with its reasons and comment, each
    evaluated mode's evaluation."""

    compliance: Compliance
    timings: tuple[Timing, ...]
    evaluations: tuple[Evaluation, ...]


def judge(findings: Findings) -> Judgement:
    """The judgement of a run from what it found (standard.md §7.7, sections 9.7 and 9.8)."""
    compliance = assess(findings)
    met = meets_image_count(findings.profile, findings.images)
    timings = tuple(
        dataclasses.replace(
            timing,
            reasons=tuple(r.text for r in compliance.for_test(timing.latin, timing.mode)),
            comment=result_comment(findings.particulars),
            # A designation names the run's table set and image count.
            meets_image_count=met,
            table_set=findings.particulars.table_set,
            requested_images=findings.images,
        )
        for timing in findings.timings
    )
    evaluations = _evaluations(
        findings.evaluated, timings, findings.particulars, compliance, met, findings.images
    )
    return Judgement(compliance, timings, tuple(evaluations))


def judged_fields(judgement: Judgement) -> dict:
    """The report's fields that state ``judgement``: the compliance, each test, each
    evaluation."""
    return {
        "compliant": judgement.compliance.compliant,
        "noncompliance_reasons": judgement.compliance.texts(),
        "benchmarks": [timing.as_dict() for timing in judgement.timings],
        "evaluations": [evaluation.as_dict() for evaluation in judgement.evaluations],
    }


def judged(report: dict, judgement: Judgement) -> dict:
    """``report`` with the fields that state ``judgement``, each where the report holds it."""
    return {**report, **judged_fields(judgement)}


def _evaluations(
    modes: Iterable[str],
    timings: Iterable[Timing],
    particulars: Particulars,
    compliance: Compliance,
    met: bool,
    images: int | None = None,
) -> list[Evaluation]:
    """Section 9.8 for each of ``modes`` over the results that count in that mode
    (``result.counted``), with its comment, designation and reasons. ``met``: the
    rounds hold section 9.3's image count; ``images``: the ``--gost-images`` count, when
    it chose the rounds instead of a profile."""
    timings = list(timings)
    out = []
    for mode in modes:
        results = {t.latin: t.orp for t in timings if t.mode == mode and counted(t)}
        evaluation = evaluate(mode, results, particulars.system_peak or 0.0)
        reasons = compliance.for_evaluation(mode)
        designation = designate_evaluation(
            mode,
            particulars.dtype,
            particulars.batch,
            particulars.cells,
            met,
            not reasons,
            particulars.table_set,
            images,
        )
        out.append(
            dataclasses.replace(
                evaluation,
                designation=designation,
                cells=particulars.cells,
                comment=tuple(comment(evaluation, particulars)),
                reasons=tuple(reason.text for reason in reasons),
                summary="; ".join(dict.fromkeys(reason.short for reason in reasons)),
            )
        )
    return out
