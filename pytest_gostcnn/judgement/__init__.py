"""The judgement: section 8's verdicts and section 9's timings turned into compliance,
designations, comments and evaluations (standard.md §7.7, sections 9.7 and 9.8); it stands
above ``conformance`` and ``performance``, since it needs both."""

from .compliance import Findings, Provenance
from .judge import Assessment, judge

__all__ = ["Assessment", "Findings", "Provenance", "judge"]
