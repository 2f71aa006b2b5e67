"""``check``'s section 9: each performance test's figures recomputed from its round times and
the cells' peaks (time, MAC/s, ОРП, spread, contention, checks), and the test a checkpoint
kept at a boundary (``run.partial``) against the rounds it claims."""

from __future__ import annotations

from pytest_gostcnn.conformance.verification import PASSED_VERDICTS
from pytest_gostcnn.model.network import CYRILLIC, Network
from pytest_gostcnn.performance.checks import Units, implausible_checks
from pytest_gostcnn.performance.contention import Contention
from pytest_gostcnn.performance.partial import PartialTest, boundary_rounds
from pytest_gostcnn.performance.plan import plan
from pytest_gostcnn.performance.timing import CellTiming, Check, Timing, macs_per_image
from pytest_gostcnn.performance.training_data import training_data

from .agreement import agrees, compare_figures


def check_peak(peak: dict | None, where: str, found: list[str]) -> None:
    """A peak given by its factors is their product (machine/peak.py)."""
    if peak is None or peak["units"] is None:
        return
    product = peak["units"] * peak["clock_hz"] * peak["macs_per_cycle_per_unit"]
    compare_figures(found, where, peak, {"macs_per_second": product})


def check_tests(
    report: dict, timings: dict[tuple[str, str], Timing], networks: dict, found: list[str]
) -> None:
    options = report["options"]
    check_peak(report["peak"], "peak", found)
    peaks = {cell["cell"]: cell["peak"] for cell in report["cells"]}
    if len(timings) != len(report["benchmarks"]):
        found.append("benchmarks: a test appears more than once")
    for stated in report["benchmarks"]:
        timing = timings[(stated["network"], stated["mode"])]
        where = f"benchmark {stated['designation']}"
        if stated["network"] not in options["networks"] or stated["mode"] not in options["modes"]:
            found.append(f"{where}: not a test of the selected networks and modes")
        for key in ("dtype", "batch"):
            if stated[key] != options[key]:
                found.append(f"{where}: {key} {stated[key]!r}, the run's is {options[key]!r}")
        network = networks.get(timing.latin)
        if network is not None:
            compare_figures(
                found, where, stated, {"macs_per_image": macs_per_image(network, timing.mode)}
            )
        expected = plan(options["profile"], options["batch"], options["images"])
        compare_figures(found, where, stated, {"rounds": expected.rounds})
        lengths = {len(c.round_seconds) for c in timing.cells}
        if len(lengths) > 1:  # the system's rounds pair the cells' round by round
            found.append(f"{where}: the cells hold {sorted(lengths)} round times, not the same")
            continue
        compare_figures(
            found,
            where,
            stated,
            {
                "images": timing.images,
                "seconds": timing.seconds,
                "macs_per_second": timing.macs_per_second,
                "peak_macs_per_second": timing.peak_macs_per_second,
                "orp_percent": timing.orp,
            },
        )
        compare_figures(
            found, f"{where}, spread", stated.get("spread", {}), timing.spread.as_dict()
        )
        if stated.get("checks") is not None or timing.checks_dict() is not None:
            written, recomputed = stated.get("checks") or {}, timing.checks_dict() or {}
            if "unit_rounds" not in written:  # a report from before units of rounds
                recomputed.pop("unit_rounds", None)
            compare_figures(found, f"{where}, checks", written, recomputed)
        if [c["cell"] for c in stated["cells"]] != list(range(options["cells"])):
            found.append(f"{where}: cells {[c['cell'] for c in stated['cells']]}, not one per cell")
        for cell, written in zip(timing.cells, stated["cells"], strict=True):
            here = f"{where}, cell {cell.cell}"
            if len(cell.round_seconds) != timing.rounds:
                found.append(
                    f"{here}: {len(cell.round_seconds)} round times for {timing.rounds} rounds"
                )
            compare_figures(
                found,
                here,
                written,
                {
                    "images": timing.rounds * timing.batch,
                    "seconds": cell.seconds,
                    "orp_percent": timing.cell_orp(cell),
                },
            )
            check_peak(written["peak"], f"{here}, peak", found)
            peak = cell.peak.macs_per_second if cell.peak else None
            if not agrees(peaks.get(cell.cell), peak):
                found.append(f"{here}: peak {peak!r}, the cell's is {peaks.get(cell.cell)!r}")
            compare_figures(
                found, f"{here}, spread", written.get("spread", {}), cell.spread.as_dict()
            )
            check_contention(here, cell.cell, cell.contention, written, report, found)
            check_round_checks(here, cell.checks, timing.rounds, found)
            check_draw(here, timing, cell, found)
            check_probe(here, cell, written, found)
            check_fingerprints(here, cell.fingerprints, cell.checks, timing.rounds, found)
        drawn = {
            tuple((a.round, a.image) for a in c.checks)
            for c in timing.cells
            if all(a.passed for a in c.checks)
        }
        if len(drawn) > 1:  # one draw for all cells: each checks the same rounds
            found.append(f"{where}: the cells checked different rounds {sorted(drawn)}")


def check_draw(here: str, timing: Timing, cell: CellTiming, found: list[str]) -> None:
    """A finished test's checks are a draw of its units (standard.md §7.7): each a whole
    unit (one image of a round, or a training unit), in order, a failed one last, and as
    many as the chance the test's units give can draw (``implausible_checks``)."""
    checks = cell.checks
    numbers = [a.round for a in checks]
    failed = [a.round for a in checks if not a.passed]
    if numbers != sorted(set(numbers)) or (failed and failed[0] != numbers[-1]):
        found.append(f"{here}: checked rounds {numbers}: not in order, once each, failed last")
        return
    k, length = timing.unit_rounds, timing.segment_rounds
    if timing.mode == "training" and k is not None and length and not 1 <= k <= length:
        found.append(f"{here}: unit_rounds {k}: not a count of rounds within a segment of {length}")
        return
    chance = timing.check_chance
    if chance is None:
        return
    for check in checks:
        if not _whole_unit(timing, check):
            found.append(f"{here}: the check of {check.subject} is not one whole unit")
    problem = implausible_checks(chance, timing.decided_units(cell), len(checks))
    if problem is not None:
        found.append(f"{here}: {problem}")


def _whole_unit(timing: Timing, check: Check) -> bool:
    """An inference check judges one image of one round; a training check one whole unit,
    from its first round to its last (``checks.Units``)."""
    if timing.mode == "inference":
        return check.rounds == 1 and check.image is not None and 0 <= check.image < timing.batch
    units = timing.units
    return (
        check.image is None
        and 1 <= check.round <= timing.rounds
        and units.first(check.round) == check.round
        and check.last_round == units.last(check.round)
    )


def check_probe(here: str, cell: CellTiming, written: dict, found: list[str]) -> None:
    """The probe's rate is its best call's (``performance/probe.py``)."""
    if cell.probe is not None:
        compare_figures(found, f"{here}, probe", written.get("probe") or {}, cell.probe.as_dict())


def check_fingerprints(
    here: str,
    fingerprints: tuple[str | None, ...],
    checks: tuple[Check, ...],
    rounds: int,
    found: list[str],
) -> None:
    """One fingerprint per timed round (none in a report before them), missing only where
    the round delivered nothing: after a failed check, whose test calls the backend no more."""
    if not fingerprints:
        return
    if len(fingerprints) != rounds:
        found.append(f"{here}: {len(fingerprints)} output fingerprints for {rounds} rounds")
        return
    failed = min((a.round for a in checks if not a.passed), default=rounds)
    idle = [n for n, name in enumerate(fingerprints, 1) if name is None and n <= failed]
    if idle:
        found.append(f"{here}: rounds {idle[:5]} delivered no output, yet no check failed before")


def check_contention(
    here: str,
    cell: int,
    contention: Contention | None,
    written: dict,
    report: dict,
    found: list[str],
) -> None:
    """A cell's contention counts: its shares and whether the cell was shared, recomputed,
    and cell 0's cores the invocation's (the other cells' are other processes')."""
    if contention is None:
        return
    compare_figures(found, f"{here}, contention", written["contention"], contention.as_dict())
    cores = report.get("invocation", {}).get("cell_cores")
    if cell == 0 and cores is not None and contention.cores != cores:
        found.append(
            f"{here}: contention counted {contention.cores} cores, the invocation's cell "
            f"has {cores}"
        )


def check_round_checks(here: str, checks: tuple[Check, ...], rounds: int, found: list[str]) -> None:
    """Each check against its own figures, and its round among the ``rounds`` timed."""
    for check in checks:
        if check.passed and check.worst_ratio is not None and check.worst_ratio >= 1:
            found.append(
                f"{here}: check of round {check.round} passed with СКО/СКОП "
                f"{check.worst_ratio:g}, not below 1"
            )
        if not check.passed and check.failure is None:
            found.append(f"{here}: check of round {check.round} failed without a failure")
        if not 1 <= check.round <= rounds:
            found.append(f"{here}: checked round {check.round} of {rounds} rounds")
        if check.passed != (check.verdict in PASSED_VERDICTS):
            found.append(
                f"{here}: check of round {check.round} passed={check.passed} "
                f"with verdict {check.verdict!r}"
            )


def check_partial(report: dict, networks: dict[str, Network], found: list[str]) -> None:
    """The test a checkpoint kept at a boundary (``run.partial``): not a result, so nothing
    is judged of it, but ``--gost-resume`` goes on from it, so it must be what a run of
    these options leaves there: a test of the run that has no result, stopped at one of its
    boundaries before its end, each cell with that many round times and checks of rounds
    up to there (a failed one last). A cell's first image follows from a key drawn in the
    round's setup and kept by nobody: it is not recomputed."""
    stored = report["run"].get("partial")
    if stored is None:
        return
    options, state = report["options"], report["run"]
    test = PartialTest.from_dict(stored)
    where = f"run.partial {stored['test']}"
    if test.latin not in options["networks"] or test.mode not in options["modes"]:
        found.append(f"{where}: not a test of the selected networks and modes")
        return
    for key in ("dtype", "batch"):
        if stored[key] != options[key]:
            found.append(f"{where}: {key} {stored[key]!r}, the run's is {options[key]!r}")
    expected = plan(options["profile"], options["batch"], options["images"])
    boundary = boundary_rounds(test.mode, training_data(test.dtype)[0])
    compare_figures(
        found,
        where,
        stored,
        {
            "test": test.name,
            "letter": CYRILLIC[test.latin],
            "rounds": expected.rounds,
            "boundary_rounds": boundary,
        },
    )
    if not 0 < test.done < test.rounds or test.done % boundary:
        found.append(
            f"{where}: timed round {test.done} of {test.rounds} is not a boundary (every "
            f"{boundary} rounds) before the test's end"
        )
    if test.name in state["finished"] or any(
        (b["network"], b["mode"]) == test.key for b in report["benchmarks"]
    ):
        found.append(f"{where}: the test has a result or finished, yet is kept part-way")
    stopped_in = state["stopped_in"] or {}  # its rounds done stop at a failed check
    failing = any(not a.passed for cell in test.cells for a in cell.checks)
    later = stopped_in.get("test") == test.name and stopped_in["timed_rounds_done"] < test.done
    if later and not failing:
        found.append(
            f"{where}: kept after timed round {test.done}, yet the run stopped in it after "
            f"{stopped_in['timed_rounds_done']}"
        )
    if [c.cell for c in test.cells] != list(range(options["cells"])):
        found.append(f"{where}: cells {[c.cell for c in test.cells]}, not one per cell")
    if len({cell.unit_rounds for cell in test.cells}) > 1:
        found.append(f"{where}: the cells' units {[c.unit_rounds for c in test.cells]} differ")
    for cell, written in zip(test.cells, stored["cells"], strict=True):
        here = f"{where}, cell {cell.cell}"
        k, most = cell.unit_rounds, boundary if test.mode == "training" else 1
        if k is not None and not 1 <= k <= most:
            found.append(f"{here}: unit_rounds {k}: a unit holds 1 to {most} rounds here")
            continue
        if len(cell.round_seconds) != test.done:
            found.append(f"{here}: {len(cell.round_seconds)} round times for {test.done} rounds")
        compare_figures(found, here, written, {"seconds": sum(cell.round_seconds)})
        check_contention(here, cell.cell, cell.contention, written, report, found)
        check_round_checks(here, cell.checks, test.done, found)
        check_fingerprints(here, cell.fingerprints, cell.checks, test.done, found)
        rounds = [a.round for a in cell.checks]
        failed = [n for n, a in enumerate(cell.checks) if not a.passed]
        if rounds != sorted(set(rounds)) or (failed and failed[0] != len(rounds) - 1):
            found.append(f"{here}: checked rounds {rounds}: not in order, once each, failed last")
        if any(a.last_round > test.done for a in cell.checks):
            found.append(f"{here}: a check of rounds after timed round {test.done}")
        elif not failed:  # every unit up to the boundary was drawn with the test's chance
            length = boundary if test.mode == "training" else None
            units = Units(test.mode, test.rounds, length, cell.unit_rounds)
            problem = implausible_checks(units.chance, units.up_to(test.done), len(rounds))
            if problem is not None:
                found.append(f"{here}: {problem}")
