"""The judgement: section 8's verdicts and section 9's timings turned into compliance,
designations, comments and evaluations (standard.md §7.7, sections 9.7 and 9.8); it stands
above ``conformance`` and ``performance``, since it needs both. One road in:
report -> ``findings`` -> ``judge`` -> ``judged_fields`` -> report."""

from .compliance import Findings, Provenance
from .from_report import findings
from .judge import Judgement, judge, judged, judged_fields
from .result import no_result

__all__ = [
    "Findings",
    "Judgement",
    "Provenance",
    "findings",
    "judge",
    "judged",
    "judged_fields",
    "no_result",
]
