"""What the suite's items found in one session, on one cell."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_gostcnn import judgement
from pytest_gostcnn.conformance.verification import Verification
from pytest_gostcnn.performance.timing import Timing


@dataclass(frozen=True)
class Assessment(judgement.Assessment):
    """The judge's assessment of the session's results, on cell 0, with the exit status of
    the whole system (the plugin's choice among the cells, not the judge's)."""

    exitstatus: int
    exit_reason: str | None  # why the run exits non-zero (or why it exits 0 regardless)


@dataclass
class Results:
    """Everything the suite's items found in this session, on this cell."""

    layers: list[Verification] = field(default_factory=list)
    networks: dict[tuple[str, str], Verification] = field(default_factory=dict)
    timings: dict[tuple[str, str], Timing] = field(default_factory=dict)
    benchmarked: list[tuple[str, str]] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # this cell's (item, reason)
    outcomes: dict[str, str] = field(default_factory=dict)  # suite item -> its outcome
    skips: list[str] = field(default_factory=list)  # the skipped suite items' reasons
    cell_reports: list[dict] = field(default_factory=list)  # every cell's, on cell 0
    suite_items: int = 0  # items of the suite collected in this run
    selected: int | None = None  # of those, the ones left after -k, -m, --deselect, --lf
    suite_nodes: list[str] = field(default_factory=list)  # the selected items' node ids
    benchmark_items: dict[str, tuple[str, str]] = field(default_factory=dict)  # node -> test
    stopped: str | None = None  # why the run stopped before its end (cell 0, once it ends)
    assessment: Assessment | None = None  # on cell 0, once the session ends

    @property
    def verified_any(self) -> bool:
        return bool(self.networks or self.layers)

    def outcome(self, name: str, when: str, outcome: str) -> None:
        """One phase's outcome of a suite item: failed wins over skipped over passed."""
        rank = {"passed": 0, "skipped": 1, "failed": 2}
        if when == "call" or outcome != "passed":
            previous = self.outcomes.get(name, "passed")
            self.outcomes[name] = max(previous, outcome, key=rank.__getitem__)
