"""What a run holds as it goes, on one cell, as records that each say what they hold and
have one writer: what it read of earlier reports (``Earlier``), what pytest selected and
said of the suite's items (``Selection``, ``Outcomes``), section 8's verifications
(``Verified``), section 9's timings (``Timed``), the paired gate's (``Versus``), the
reports written and the run's end (``Reported``) and the suite's own seconds
(``SuiteSeconds``); and, on cell 0 once it ends, the judged results (``Conclusion``)."""

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
# teardown, the barriers), the report's checkpoints, the paired gate's baseline.
SUITE_WORK = (
    "layer_verification",
    "network_verification",
    "checks",
    "round_setup",
    "checkpoints",
    "versus",
)
Test = tuple[str, str]  # (network's Latin letter, mode)


@dataclass(frozen=True)
class Conclusion(judgement.Judgement):
    """How a run ended, on cell 0: the judgement of its results, with the exit status of the
    whole system (the plugin's choice among the cells, not the judge's)."""

    exitstatus: int
    exit_reason: str | None  # why the run exits non-zero (or why it exits 0 regardless)
    comparison: Comparison | None = None  # against --gost-compare's baseline, once it ends


@dataclass(frozen=True)
class Earlier:
    """What the run read of earlier reports at its start (``plugin/session.py``, from
    ``startup``): the finished tests ``--gost-resume`` keeps (not timed again), where from,
    the test it goes on from at its last boundary, and ``--gost-compare``'s baseline (its
    path and tests)."""

    timings: dict[Test, Timing] = field(default_factory=dict)
    source: dict | None = None
    partial: PartialTest | None = None
    baseline: tuple[str, tuple[Timing, ...]] | None = None


@dataclass
class Selection:
    """What pytest collected and selected of the suite (``plugin/session.py``), and the
    time of the selected benchmark tests, estimated as they run."""

    collected: int = 0  # items of the suite collected in this run
    selected: int | None = None  # of those, the ones left after -k, -m, --deselect, --lf
    nodes: list[str] = field(default_factory=list)  # the selected items' node ids
    benchmarks: dict[str, Test] = field(default_factory=dict)  # node id -> test
    # What the selected items verify: how many layer steps, which tests' networks (a
    # benchmark verifies its network first).
    layer_steps: int = 0
    networks: set[Test] = field(default_factory=set)
    estimate: RunEstimate | None = None


@dataclass
class Outcomes:
    """What pytest said of the suite's items on this cell (``plugin/session.py``)."""

    by_item: dict[str, str] = field(default_factory=dict)  # node id -> its outcome
    failures: list[tuple[str, str]] = field(default_factory=list)  # (item, reason)
    skips: list[str] = field(default_factory=list)  # the skipped items' reasons

    def add(self, name: str, when: str, outcome: str) -> None:
        """One phase's outcome of an item: failed wins over skipped over passed."""
        rank = {"passed": 0, "skipped": 1, "failed": 2}
        if when == "call" or outcome != "passed":
            previous = self.by_item.get(name, "passed")
            self.by_item[name] = max(previous, outcome, key=rank.__getitem__)


@dataclass
class Verified:
    """Section 8 on this cell (``plugin/items.py``): each layer step and each network
    verified, and the suite's side of the network-shape layer case being verified, which
    its steps share."""

    layers: list[Verification] = field(default_factory=list)
    networks: dict[Test, Verification] = field(default_factory=dict)
    layer_data: dict[str, object] = field(default_factory=dict)

    @property
    def any(self) -> bool:
        return bool(self.networks or self.layers)


@dataclass
class Timed:
    """Section 9 on this cell (``plugin/timed_items.py``): the tests timed or kept, in the
    order they ended; the tests begun; the one timing now (its name, timed rounds ended and
    rounds: the summary's, should the run stop in it); the items that failed only for
    falling below a baseline."""

    timings: dict[Test, Timing] = field(default_factory=dict)
    begun: list[Test] = field(default_factory=list)
    now: tuple[str, int, int] | None = None
    fell: dict[str, str] = field(default_factory=dict)  # node id -> why


@dataclass
class Versus:
    """The paired gate on this cell (``plugin/versus.py``): the baseline backend's section
    8 of each network, and each test's verdict against it, in the order the tests ended."""

    networks: dict[Test, Verification] = field(default_factory=dict)
    verdicts: dict[Test, Verdict] = field(default_factory=dict)


@dataclass
class Reported:
    """The reports written and the run's end (``plugin/reporting.py``): every cell's facts
    (on cell 0), a checkpoint that could not be written (every cell learns it: the run
    stops at once) and the finished tests the file held after its last write; the test a
    checkpoint kept at a boundary; and on cell 0 once the run ends, why it stopped before
    its end and its conclusion."""

    cell_reports: list[dict] = field(default_factory=list)
    failure: str | None = None
    kept: list[str] | None = None
    # Once a boundary passed or a test ended (``moved_on``), the test kept at the last
    # boundary (None: none); before, the one --gost-resume goes on from stands.
    partial: PartialTest | None = None
    moved_on: bool = False
    stopped: str | None = None
    conclusion: Conclusion | None = None


class SuiteSeconds:
    """This cell's seconds of the suite's own work, by kind (``SUITE_WORK``): each kind
    added to by the code that does it."""

    def __init__(self) -> None:
        self._seconds = dict.fromkeys(SUITE_WORK, 0.0)

    def add(self, kind: str, seconds: float) -> None:
        self._seconds[kind] += seconds

    def __getitem__(self, kind: str) -> float:
        return self._seconds[kind]

    def as_dict(self) -> dict[str, float]:
        return dict(self._seconds)


@dataclass
class Results:
    """A run's records on this cell; ``earlier`` is set once, when the run starts."""

    earlier: Earlier = field(default_factory=Earlier)
    selection: Selection = field(default_factory=Selection)
    outcomes: Outcomes = field(default_factory=Outcomes)
    verified: Verified = field(default_factory=Verified)
    timed: Timed = field(default_factory=Timed)
    versus: Versus = field(default_factory=Versus)
    reported: Reported = field(default_factory=Reported)
    suite_seconds: SuiteSeconds = field(default_factory=SuiteSeconds)

    @property
    def timings(self) -> dict[Test, Timing]:
        """Every test the report holds: the resumed ones first, then this run's."""
        return {**self.earlier.timings, **self.timed.timings}

    @property
    def partial(self) -> PartialTest | None:
        """The test a checkpoint keeps at its last boundary (docs/report.md)."""
        return self.reported.partial if self.reported.moved_on else self.earlier.partial
