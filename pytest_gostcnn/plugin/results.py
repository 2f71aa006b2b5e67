"""What the suite's items found in one session, on one cell."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_gostcnn.conformance.verification import Verification
from pytest_gostcnn.performance.timing import Timing


@dataclass
class Results:
    """Everything the suite's items found in this session, on this cell."""

    layers: list[Verification] = field(default_factory=list)
    networks: dict[tuple[str, str], Verification] = field(default_factory=dict)
    timings: dict[tuple[str, str], Timing] = field(default_factory=dict)
    benchmarked: list[tuple[str, str]] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # this cell's (item, reason)
    cell_reports: list[dict] = field(default_factory=list)  # every cell's, on cell 0
    exitstatus: int | None = None
    suite_items: int = 0  # items of the suite collected in this run

    @property
    def verified_any(self) -> bool:
        return bool(self.networks or self.layers)
