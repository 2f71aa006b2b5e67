"""What a run holds as it goes, on one cell: what its items found, what it resumed from, what
it is timing now; and, on cell 0 once it ends, the judged results."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_gostcnn import judgement
from pytest_gostcnn.conformance.verification import Verification
from pytest_gostcnn.performance.estimate import RunEstimate
from pytest_gostcnn.performance.partial import PartialTest
from pytest_gostcnn.performance.timing import Timing
from pytest_gostcnn.reports.compare import Comparison
from pytest_gostcnn.reports.paired import Verdict

# The suite's own work, apart from the timed rounds, by kind (the report's cells'
# ``suite_seconds``): section 8's layer steps and networks, the checks, what a test does
# around its timed rounds (loading the weights, the warm-up, each round's untimed setup and
# teardown, the barriers), the report's checkpoints.
SUITE_WORK = (
    "layer_verification",
    "network_verification",
    "checks",
    "round_setup",
    "checkpoints",
    "versus",
)


@dataclass(frozen=True)
class Conclusion(judgement.Judgement):
    """How a run ended, on cell 0: the judgement of its results, with the exit status of the
    whole system (the plugin's choice among the cells, not the judge's)."""

    exitstatus: int
    exit_reason: str | None  # why the run exits non-zero (or why it exits 0 regardless)
    comparison: Comparison | None = None  # against --gost-compare's baseline, once it ends


@dataclass
class Results:
    """All the mutable state of a run, on this cell: what the suite's items found, what
    pytest said of them, what ``--gost-resume`` kept, and what is being timed now."""

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
    # What the selected items verify: how many layer steps, which (network, mode) pairs (a
    # benchmark verifies its network first).
    layer_steps_selected: int = 0
    networks_selected: set[tuple[str, str]] = field(default_factory=set)
    stopped: str | None = None  # why the run stopped before its end (cell 0, once it ends)
    # A checkpoint of --gost-report that could not be written (every cell learns it: the
    # run stops at once), and the finished tests the file held after its last write.
    report_failure: str | None = None
    report_kept: list[str] | None = None
    conclusion: Conclusion | None = None  # on cell 0, once the session ends
    # --gost-resume: the finished tests of the stopped run, not timed again, and where from.
    resumed: dict[tuple[str, str], Timing] = field(default_factory=dict)
    resumed_from: dict | None = None
    # --gost-compare: the baseline's path and tests, which the timed tests are compared with,
    # and the items that failed for falling below it alone (no failure of the standard's).
    baseline: tuple[str, tuple[Timing, ...]] | None = None
    fell: dict[str, str] = field(default_factory=dict)  # item node id -> why
    # --gost-versus: the baseline backend's section 8 of each network, and each test's
    # verdict against it, in the order the tests ended.
    versus_networks: dict[tuple[str, str], Verification] = field(default_factory=dict)
    versus: dict[tuple[str, str], Verdict] = field(default_factory=dict)
    # The time of the selected benchmark tests, estimated as they run (timed_items.py).
    estimate: RunEstimate | None = None
    # The performance test timing now, for the summary of a run stopped in it: its name,
    # its timed rounds ended and its rounds (``Passed``).
    timing_now: tuple[str, int, int] | None = None
    # The performance test stopped at a boundary, as the last checkpoint inside it kept it
    # (from --gost-resume until its test runs), and the one --gost-resume continues.
    partial: PartialTest | None = None
    resumed_partial: PartialTest | None = None
    # The suite's side of the network-shape layer case being verified, shared by its steps.
    layer_data: dict[str, object] = field(default_factory=dict)
    # This cell's seconds of the suite's own work, by kind (SUITE_WORK).
    suite_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(SUITE_WORK, 0.0))

    @property
    def verified_any(self) -> bool:
        return bool(self.networks or self.layers)

    def outcome(self, name: str, when: str, outcome: str) -> None:
        """One phase's outcome of a suite item: failed wins over skipped over passed."""
        rank = {"passed": 0, "skipped": 1, "failed": 2}
        if when == "call" or outcome != "passed":
            previous = self.outcomes.get(name, "passed")
            self.outcomes[name] = max(previous, outcome, key=rank.__getitem__)
