"""One test's result: whether its timing is a result at all, and whether it counts in its
mode's evaluation (standard.md §7.7, section 9.8).

A timing is no result when a check of its rounds failed (they differ from the verified
implementation's), a timed round delivered an earlier round's output, or a cell's ОРП is
above 100 % or its peak below the rate its backend's own kernel measured: ``no_result``
gives its reasons, ``counted`` whether the evaluation takes it. The session's conditions,
which ask this of every test, are ``compliance.CONDITIONS``.
"""

from __future__ import annotations

from pytest_gostcnn.machine.peak import si
from pytest_gostcnn.model.network import CYRILLIC
from pytest_gostcnn.performance.timing import CellTiming, Timing

from .reasons import Reason, ReasonKind


def network_name(latin: str) -> str:
    """A network as a reason names it: its letter, then its Latin id, ``Р (R)``."""
    return f"{CYRILLIC[latin]} ({latin})"


def named_test(timing: Timing) -> str:
    """The test ``timing`` is of, as a reason names it: ``Р (R) training``."""
    return f"{network_name(timing.latin)} {timing.mode}"


def on_cell(timing: Timing, cell: int) -> str:
    """`` on cell N`` where the test ran on several cells."""
    return f" on cell {cell}" if len(timing.cells) > 1 else ""


def repeated_outputs(timing: Timing) -> list[Reason]:
    """The timed rounds of ``timing`` that delivered the very bytes of an earlier round's
    output (the same fingerprint), on any cell: rounds on different images that answer
    alike gave a previous answer (standard.md §7.7). One reason for the test, or none."""
    first: dict[str, tuple[int, int]] = {}
    repeats = []
    for cell in timing.cells:
        for number, name in enumerate(cell.fingerprints, 1):
            if name is not None and name in first:
                repeats.append(((cell.cell, number), first[name]))
            elif name is not None:
                first[name] = (cell.cell, number)
    if not repeats:
        return []
    (cell, number), (earlier_cell, earlier) = repeats[0]
    was = f"round {earlier}{on_cell(timing, earlier_cell)}"
    return [
        Reason(
            ReasonKind.OUTPUT_REPEATED,
            f"output repeated: {named_test(timing)}: {len(repeats)} timed round"
            f"{'s' if len(repeats) > 1 else ''} delivered an earlier round's output, the "
            f"first round {number}{on_cell(timing, cell)} the bytes of {was}: rounds on "
            "other images cannot answer alike, so a previous answer was given: not a result",
            timing.mode,
            timing.latin,
        )
    ]


def above_peak(timing: Timing) -> list[tuple[CellTiming, float]]:
    """(cell, ОРП) of every cell whose ОРП is above 100 % (standard.md §7.7): not a result,
    since the time or the peak is wrong."""
    return [
        (cell, orp)
        for cell in timing.cells
        if (orp := timing.cell_orp(cell)) is not None and orp > 100
    ]


def below_probe(timing: Timing) -> list[CellTiming]:
    """Every cell whose peak is below the rate its backend's probe measured before the
    rounds (standard.md §7.7, fifth release): the peak is false."""
    return [
        cell
        for cell in timing.cells
        if cell.peak is not None
        and cell.probe is not None
        and cell.peak.macs_per_second < cell.probe.macs_per_second
    ]


def impossible_results(timing: Timing) -> list[Reason]:
    """One reason for each cell of ``timing`` whose ОРП is above 100 %, and one for each
    whose peak is below its backend's measured rate."""
    above = [
        Reason(
            ReasonKind.ORP_ABOVE_PEAK,
            f"{named_test(timing)}: ОРП {orp:.3g} %{on_cell(timing, cell.cell)} is above 100 % "
            f"of the cell peak ({cell.peak.source}), so the time or the peak is wrong: "
            "not a result",
            timing.mode,
            timing.latin,
        )
        for cell, orp in above_peak(timing)
    ]
    return above + [
        Reason(
            ReasonKind.PEAK_BELOW_PROBE,
            f"{named_test(timing)}: the cell peak {si(cell.peak.macs_per_second)}MAC/s "
            f"({cell.peak.source}){on_cell(timing, cell.cell)} is below the "
            f"{si(cell.probe.macs_per_second)}MAC/s the backend's own kernel of row "
            f"{cell.probe.row} measured before the rounds: the peak is false, not a result",
            timing.mode,
            timing.latin,
        )
        for cell in below_probe(timing)
    ]


def failed_checks(timing: Timing) -> list[Reason]:
    """One reason for each check of ``timing``'s rounds that failed, on any cell."""
    return [
        Reason(
            ReasonKind.CHECK_FAILED,
            f"check failed: {named_test(timing)}, timed {check.subject}"
            f"{on_cell(timing, cell)}: {check.failure}",
            timing.mode,
            timing.latin,
        )
        for cell, check in timing.failed_checks
    ]


def no_result(timing: Timing) -> list[Reason]:
    """Why ``timing`` is no result at all, so its item fails and its evaluation does not
    count it: a check of its rounds failed (its rounds differ from the verified
    implementation's), a round repeated an earlier one's output, or a cell's ОРП is above
    100 %."""
    return failed_checks(timing) + repeated_outputs(timing) + impossible_results(timing)


def counted(timing: Timing) -> bool:
    """Whether a test's result counts in its evaluation: it has an ОРП and it is a result
    (``no_result``: every check passed, no output repeated, no cell's ОРП above 100 %)."""
    return timing.orp is not None and not no_result(timing)


def item_failure(
    timing: Timing, reasons: list[Reason], seed: int, rerun: str, resumed: bool = False
) -> str:
    """Why a test's item fails, from the first of its ``reasons`` (``no_result``'s), with
    what to do: the ``seed`` and the ``rerun`` command of a failed check or a repeated
    output, the way out of a false peak; ``resumed``: the timing is a stopped run's."""
    first = reasons[0]
    if first.kind is ReasonKind.OUTPUT_REPEATED:
        return f"{first.text} (docs/benchmarking.md, Checked rounds)\nrerun: {rerun}"
    if first.kind is ReasonKind.PEAK_BELOW_PROBE:
        way_out = "give the cell's true peak with --gost-peak=MAC/s"
        return f"{first.text} ({way_out}; docs/benchmarking.md, The peak's floor)"
    if first.kind is ReasonKind.ORP_ABOVE_PEAK:
        return _above_peak(timing, *above_peak(timing)[0])
    cell, check = timing.failed_checks[0]
    earlier = " (in the resumed run)" if resumed else ""
    return "\n".join(
        [
            f"{timing.name}: check of timed {check.subject} of {timing.rounds}"
            f"{on_cell(timing, cell)}{earlier} failed ({check.verdict}); section 9 counts no "
            "result whose rounds differ from the verified implementation",
            f"first failure: {check.failure}",
            f"worst array: {check.worst_array}",
            f"seed: --gost-seed={seed}",
            f"rerun: {rerun}",
        ]
    )


def _above_peak(timing: Timing, cell: CellTiming, orp: float) -> str:
    """An ОРП above 100 %: which of the peak and the rounds to doubt, and how to mend it."""
    way_out = (
        "check the value given to --gost-peak"
        if not cell.peak.estimated
        else "give the cell's true peak with --gost-peak=MAC/s, e.g. 2.5T"
    )
    measured = ""
    if cell.probe is not None and cell.probe.macs_per_second > cell.peak.macs_per_second:
        measured = (
            f"; the backend's own kernel ran at {si(cell.probe.macs_per_second)}MAC/s "
            "before the rounds"
        )
    return (
        f"{timing.name}: ОРП {orp:.3g} %{on_cell(timing, cell.cell)} is above 100 % of the cell "
        f"peak {cell.peak.describe()}{measured}: not a result. Either the peak is wrong "
        f"({way_out}) or the backend's rounds end before its work does (a round ends when "
        "its results reach the host: docs/benchmarking.md, One round)"
    )
