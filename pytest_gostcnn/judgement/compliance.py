"""Section 9's word *compliant*: every condition a result must meet, and each it misses.

standard.md §7.7: the full profile's 1,000,000 images per cell (or an image count of at least
that); every selected network verified correct in that mode in the same session; every layer
item of the suite run and passed there; СКОП as derived, not overridden; tables of a
provenance that counts; every checked round passed; no cell failed; and, the project's
guard, no cell shared with other processes while timed, and no round timed beside another
backend's (``--gost-versus``, a gate's run). Each is one function of
``CONDITIONS``; ``assess`` asks them all, in order: no reason means compliant. Whether one
test's timing is a result at all is ``result``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pytest_gostcnn.conformance.verification import FAILED_VERDICTS
from pytest_gostcnn.model.network import LATIN
from pytest_gostcnn.model.table_files import CANONICAL_SET
from pytest_gostcnn.performance.contention import SHARED_LIMIT
from pytest_gostcnn.performance.timing import FULL_PROFILE_IMAGES, Timing

from .evaluation import Particulars
from .provenance import Provenance
from .reasons import Reason, ReasonKind
from .result import (
    counted,
    failed_checks,
    impossible_results,
    named_test,
    network_name,
    on_cell,
    repeated_outputs,
)

# standard.md §5: the canonical set holds the widely used networks, which results can be held
# against, but they are not the standard's typical networks.
NOT_TYPICAL = (
    "tables: the canonical set, the widely used networks at full size, not the standard's "
    "typical networks (simplified analogs, section 7.1)"
)


@dataclass(frozen=True)
class Findings:
    """What the judge is given: what a run found (every cell's, on cell 0) and the options
    it ran with, as its report states them (``from_report.findings``, the one builder)."""

    modes: tuple[str, ...]
    profile: str | None  # None where --gost-images chose the rounds
    networks: tuple[str, ...]  # the selected networks' Latin ids, in the standard's order
    tables_held: int  # how many networks the tables hold
    verdicts: Mapping[tuple[str, str], str]  # (network, mode) -> verdict, as verified
    layer_items: int  # the suite's layer items for these options
    layer_verdicts: tuple[str, ...]  # the verdict of each layer item that ran
    threshold: float | None
    provenances: Mapping[str, Provenance]
    timings: tuple[Timing, ...]
    cell_failures: tuple[tuple[int, tuple[str, ...]], ...]  # (cell, failed item names)
    # What a result's and an evaluation's comments state (9.7): the type, batch, cells,
    # device, peak, software and table set (the shipped set's name, or "user").
    particulars: Particulars
    evaluated: tuple[str, ...] = ()  # the modes evaluated (9.8): those with a test begun
    # The selected items the run has not run (yet, or ever: it stopped): how many outside
    # section 9, and the performance tests by name.
    not_run: tuple[int, list[str]] = (0, [])
    ended: bool = True  # False in a report written while the run goes on (a checkpoint)
    images: int | None = None  # --gost-images: per test per cell, instead of the profile
    versus: str | None = None  # --gost-versus: the baseline backend timed beside the rounds


@dataclass(frozen=True)
class Compliance:
    """Every reason a session's results are not compliant; none: they are."""

    reasons: tuple[Reason, ...]

    @property
    def compliant(self) -> bool:
        return not self.reasons

    def texts(self) -> list[str]:
        return [reason.text for reason in self.reasons]

    def for_test(self, network: str, mode: str) -> tuple[Reason, ...]:
        """The reasons that concern one test's own result."""
        return tuple(
            r
            for r in self.reasons
            if not r.evaluation and r.mode in (None, mode) and r.network in (None, network)
        )

    def for_evaluation(self, mode: str) -> tuple[Reason, ...]:
        """The reasons that concern the evaluation of one mode."""
        return tuple(r for r in self.reasons if r.mode in (None, mode))


def meets_image_count(profile: str | None, images: int | None) -> bool:
    """Section 9.3: 1,000,000 images per cell: the full profile, or an image count
    (``--gost-images``, which replaces the profile) of at least that many."""
    if images is not None:
        return images >= FULL_PROFILE_IMAGES
    return profile == "full"


def image_count(findings: Findings) -> list[Reason]:
    if meets_image_count(findings.profile, findings.images):
        return []
    if findings.images is not None:
        return [
            Reason(
                ReasonKind.IMAGES,
                f"--gost-images={findings.images}: section 9.3 requires 1,000,000 images per "
                "cell (run --gost-profile=full instead)",
                words=f"images={findings.images}",
            )
        ]
    return [
        Reason(
            ReasonKind.QUICK_PROFILE,
            "quick profile: section 9.3 requires 1,000,000 images per cell "
            "(run --gost-profile=full)",
        )
    ]


def timed_alone(findings: Findings) -> list[Reason]:
    """A paired gate's run (``--gost-versus``) times each candidate round between the
    baseline backend's: a gate's figures, not the cell's alone."""
    if findings.versus is None:
        return []
    return [
        Reason(
            ReasonKind.TIMED_BESIDE_A_BASELINE,
            f"--gost-versus={findings.versus}: the rounds alternated with the baseline "
            "backend's in one process, a gate's run (certify with a run alone)",
        )
    ]


def run_complete(findings: Findings) -> list[Reason]:
    reasons = []
    others, tests = findings.not_run
    if others or tests:
        parts = [f"{len(tests)} performance test{'s' * (len(tests) != 1)}"] if tests else []
        parts += [f"{others} other item{'s' * (others != 1)} of the suite"] if others else []
        shown = f" ({', '.join(tests)})" if tests else ""
        reasons.append(
            Reason(
                ReasonKind.RUN_INCOMPLETE,
                f"run incomplete: {' and '.join(parts)} not run{shown}",
                evaluation=True,
            )
        )
    if not findings.ended:
        reasons.append(
            Reason(
                ReasonKind.RUN_NOT_ENDED,
                "run not ended: the report was written while the run was going on (a "
                "checkpoint); the run's own end decides",
                evaluation=True,
            )
        )
    return reasons


def every_network(findings: Findings) -> list[Reason]:
    if len(findings.networks) >= findings.tables_held:
        return []
    return [
        Reason(
            ReasonKind.NETWORKS_DESELECTED,
            f"networks: {len(findings.networks)} of {findings.tables_held} selected "
            "(--gost-networks)",
        )
    ]


def networks_verified(findings: Findings) -> list[Reason]:
    reasons = []
    for latin in findings.networks:
        for mode in findings.modes:
            verdict = findings.verdicts.get((latin, mode))
            if verdict is None:
                text = f"{network_name(latin)} {mode}: not verified in this session"
            elif verdict in FAILED_VERDICTS:
                text = f"{network_name(latin)} {mode}: verified {verdict}"
            else:
                continue
            reasons.append(Reason(ReasonKind.NETWORK_NOT_VERIFIED, text, mode, latin))
    return reasons


def layers_passed(findings: Findings) -> list[Reason]:
    reasons = []
    ran = len(findings.layer_verdicts)
    failed = sum(verdict in FAILED_VERDICTS for verdict in findings.layer_verdicts)
    if ran < findings.layer_items:
        reasons.append(
            Reason(
                ReasonKind.LAYER_ITEMS_DESELECTED,
                f"layer items: {ran} of {findings.layer_items} ran in this session "
                "(deselected by -k, -m, --deselect or --lf)",
            )
        )
    if failed:
        reasons.append(
            Reason(
                ReasonKind.LAYER_ITEMS_FAILED,
                f"layer items: {failed} of {findings.layer_items} failed",
            )
        )
    return reasons


def threshold_derived(findings: Findings) -> list[Reason]:
    if findings.threshold is None:
        return []
    return [
        Reason(
            ReasonKind.THRESHOLD_OVERRIDDEN,
            f"СКОП overridden by --gost-rmse-threshold={findings.threshold:g} (section 8 "
            "derives it)",
        )
    ]


def tables_count(findings: Findings) -> list[Reason]:
    reasons = []
    if findings.particulars.table_set == CANONICAL_SET:
        reasons.append(Reason(ReasonKind.CANONICAL_SET, NOT_TYPICAL))
    for latin in findings.networks:
        provenance = findings.provenances[latin]
        if not provenance.compliant:
            reasons.append(
                Reason(
                    ReasonKind.TABLES_PROVENANCE,
                    f"tables: {network_name(latin)} is {provenance.describe()}; only the shipped "
                    "reconstructions or official tables count",
                    network=latin,
                )
            )
    return reasons


def rounds_checked(findings: Findings) -> list[Reason]:
    reasons = []
    for timing in findings.timings:
        reasons += failed_checks(timing)
        if not all(cell.checks for cell in timing.cells):
            reasons.append(
                Reason(
                    ReasonKind.NOT_CHECKED,
                    f"not checked: {named_test(timing)} has a cell with no checked round",
                    timing.mode,
                    timing.latin,
                )
            )
    return reasons


def outputs_fresh(findings: Findings) -> list[Reason]:
    return [reason for timing in findings.timings for reason in repeated_outputs(timing)]


def results_possible(findings: Findings) -> list[Reason]:
    return [reason for timing in findings.timings for reason in impossible_results(timing)]


def cells_unshared(findings: Findings) -> list[Reason]:
    """The time of a test is its cell's own: no thread of it waited for a core more than
    ``SHARED_LIMIT`` of the timed rounds' time (docs/benchmarking.md, "A shared cell")."""
    reasons = []
    for timing in findings.timings:
        for cell in timing.shared_cells:
            counted = cell.contention
            who, of = "one of its threads", "of the timed rounds' time"
            if counted.delay_seconds is None:  # a report that predates the delay, its words
                who, of = "its threads", "of their ready time in the timed rounds"
            reasons.append(
                Reason(
                    ReasonKind.CELL_SHARED,
                    f"cell shared: {named_test(timing)}{on_cell(timing, cell.cell)}: {who} "
                    f"waited for one of the cell's {counted.cores} cores "
                    f"{100 * counted.judged_share:.0f} % {of} (more than "
                    f"{100 * SHARED_LIMIT:.0f} %): other work held the cores, so the time is "
                    "not the cell's own",
                    timing.mode,
                    timing.latin,
                )
            )
    return reasons


def cells_passed(findings: Findings) -> list[Reason]:
    reasons = []
    for cell, items in findings.cell_failures:
        where = f"cell {cell}: " if findings.particulars.cells > 1 else ""
        reasons.append(
            Reason(
                ReasonKind.ITEMS_FAILED,
                f"{where}{len(items)} item{'s' if len(items) > 1 else ''} of the suite failed "
                f"(first: {items[0]})",
            )
        )
    return reasons


def evaluations_complete(findings: Findings) -> list[Reason]:
    reasons = []
    for mode in findings.modes:
        missing = [latin for latin in LATIN.values() if not _counted(findings.timings, latin, mode)]
        if missing:
            reasons.append(
                Reason(
                    ReasonKind.EVALUATION_INCOMPLETE,
                    f"{mode} evaluation incomplete: no result for "
                    + ", ".join(network_name(latin) for latin in missing),
                    mode,
                    evaluation=True,
                )
            )
    return reasons


# Every condition of standard.md §7.7, in the order their reasons are listed: the one place
# a condition is added (the plugin, ``evaluate`` and ``check`` all judge through it).
CONDITIONS: tuple[Callable[[Findings], list[Reason]], ...] = (
    image_count,
    timed_alone,
    run_complete,
    every_network,
    networks_verified,
    layers_passed,
    threshold_derived,
    tables_count,
    rounds_checked,
    outputs_fresh,
    results_possible,
    cells_unshared,
    cells_passed,
    evaluations_complete,
)


def assess(findings: Findings) -> Compliance:
    """Each condition of standard.md §7.7 the run's results miss, in a fixed order."""
    return Compliance(tuple(reason for condition in CONDITIONS for reason in condition(findings)))


def _counted(timings: Iterable[Timing], latin: str, mode: str) -> bool:
    return any(t.latin == latin and t.mode == mode and counted(t) for t in timings)
