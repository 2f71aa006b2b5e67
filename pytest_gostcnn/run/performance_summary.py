"""Section 9's lines, of a run or of merged reports: why a run is not compliant, the peak,
each test's row with its checks, spread and contention, and the evaluations."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_gostcnn.judgement.compliance import Compliance, Reason, ReasonKind
from pytest_gostcnn.judgement.evaluation import Evaluation, describe
from pytest_gostcnn.judgement.result import above_peak, below_probe
from pytest_gostcnn.machine.peak import Peak, si
from pytest_gostcnn.model.network import CYRILLIC
from pytest_gostcnn.performance.contention import SHARED_LIMIT
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.spread import NOISY_MEAN_ABOVE_MEDIAN
from pytest_gostcnn.performance.timing import Timing

CANONICAL_NON_COMPLIANT = (
    "CANONICAL SET: NOT COMPLIANT (the widely used networks at full size, not the standard's "
    "typical networks)"
)
NON_COMPLIANT = (
    "QUICK PROFILE: NOT COMPLIANT (section 9.3 requires 1,000,000 images per cell; "
    "run --gost-profile=full)"
)
IMAGES_NON_COMPLIANT = (
    "IMAGES={images}: NOT COMPLIANT (section 9.3 requires 1,000,000 images per cell; "
    "run --gost-profile=full instead of --gost-images)"
)


def performance_lines(
    run_plan: Plan,
    dtype: str,
    peak: Peak | None,
    compliance: Compliance,
    timings: Sequence[Timing],
    evaluations: Sequence[Evaluation],
    verbosity: int = 0,
) -> list[str]:
    """Section 9's lines: of this run, or of merged reports
    (``python -m pytest_gostcnn evaluate``); the banners say what the judge found
    (``compliance``: the image count, the canonical set).

    ``verbosity`` as pytest's (docs/benchmarking.md, "What a run prints"): below 0, the
    banners, the peak and a row per test (a failed check under its row); 0 adds each test's
    rounds and their check, and the evaluations, the comment every test shares and each
    shared cell's reasons said once; above 0, every line of every test and evaluation.
    """
    found = {reason.kind for reason in compliance.reasons}
    counted = not ({ReasonKind.QUICK_PROFILE, ReasonKind.IMAGES} & found)  # 9.3's count
    if counted:
        lines = []
    elif run_plan.requested is None:
        lines = [NON_COMPLIANT]
    else:
        lines = [IMAGES_NON_COMPLIANT.format(images=run_plan.requested)]
    if ReasonKind.CANONICAL_SET in found:
        lines.append(CANONICAL_NON_COMPLIANT)
    if peak is None:
        lines.append("no peak: ОРП needs --gost-peak=MAC/s (no estimate for this device)")
    else:
        label = "ESTIMATED " if peak.estimated else ""
        lines.append(f"cell peak ({dtype}): {label}{peak.describe()}")
        probes = [(c.probe, t) for t in timings for c in t.cells if c.probe is not None]
        if probes:
            best, where = max(probes, key=lambda p: p[0].macs_per_second)
            lines.append(
                f"the backend's best measured rate: {si(best.macs_per_second)}MAC/s (its "
                f"kernel of {CYRILLIC[where.latin]} ({where.latin}) row {best.row}, before the "
                "rounds; a peak below it fails every result: docs/benchmarking.md, The peak's "
                "floor)"
            )
    for failing, warning in (
        (
            below_probe,
            "PEAK BELOW THE MEASURED RATE ({}): the backend's own kernel ran faster than the "
            "cell peak, so the peak is false: those tests failed and count in no evaluation "
            "(--gost-peak)",
        ),
        (
            above_peak,
            "ОРП ABOVE 100 % ({}): faster than the cell peak, so the peak or the time is "
            "wrong: those tests failed and count in no evaluation (--gost-peak, or a backend "
            "whose rounds end before its work)",
        ),
    ):
        tests = [f"{CYRILLIC[t.latin]} ({t.latin}) {t.mode}" for t in timings if failing(t)]
        if tests:
            lines.append(warning.format(", ".join(tests)))
    shared = [t for t in timings if t.shared_cells]
    if shared:
        lines.append(shared_line(shared))
    noisy = [t for t in timings if t.spread.noisy]
    if noisy:
        lines.append(noisy_line(noisy))
    if not timings:
        lines.append(
            "nothing was timed: no performance test finished (see the skip reasons, -rs: "
            "e.g. --benchmark-disable, or a failed verification; or the run stopped)"
        )
    # Below -v, a comment every test shares (9.7's, of one run) is said once, above them.
    comments = {t.comment for t in timings}
    shared_comment = comments.pop() if len(comments) == 1 and verbosity <= 0 else None
    if shared_comment and verbosity == 0:
        lines.append(f"every test's {shared_comment}")
    lines.append(
        f"{'test':<40} {'images':>8} {'time s':>9} {'images/s':>9} {'MAC/s':>10} {'ОРП %':>7}"
    )
    for t in timings:
        lines += _test_lines(t, compliance, verbosity, counted, shared_comment)
    if verbosity < 0:  # the run's last lines give each evaluation
        return lines
    for evaluation in evaluations:
        lines.append(f"evaluation {evaluation.designation}:")
        lines += [f"  {line}" for line in describe(evaluation)]
        lines += [f"  {line}" for line in evaluation.comment if line != shared_comment]
        reasons = (
            evaluation.reasons
            if verbosity > 0
            else _once(compliance.for_evaluation(evaluation.mode))  # the same, in the same order
        )
        lines += [f"  not compliant: {reason}" for reason in reasons]
    return lines


def _test_lines(
    timing: Timing,
    compliance: Compliance,
    verbosity: int,
    counted: bool,
    shared_comment: str | None,
) -> list[str]:
    """One test's row and, as ``verbosity`` asks, its cells, checks, rounds, contention,
    comment and reasons."""
    t = timing
    orp = "-" if t.orp is None else f"{t.orp:.3g}"
    lines = [
        f"{t.designation:<40} {t.images:>8} "
        f"{seconds_text(t.seconds):>9} {t.images / t.seconds:>9.3g} {si(t.macs_per_second):>9}  "
        f"{orp:>6}"
    ]
    if verbosity < 0:
        return lines + ([f"  {check_line(t)}"] if t.failed_checks else [])
    if len(t.cells) > 1:  # each cell too, so that a straggler shows
        for cell in t.cells:
            cell_orp = t.cell_orp(cell)
            lines.append(
                f"{'  cell ' + str(cell.cell):<40} {cell.images:>8} {cell.seconds:>9.3g} "
                f"{cell.images / cell.seconds:>9.3g} "
                f"{si(t.cell_macs_per_second(cell)):>9}  "
                f"{'-' if cell_orp is None else f'{cell_orp:.3g}':>6}"
            )
    lines.append(f"  {check_line(t)}")
    lines.append(f"  {spread_line(t)}")
    if any(cell.contention for cell in t.cells):
        lines.append(f"  {contention_line(t)}")
    if t.comment != shared_comment:
        lines.append(f"  {t.comment}")
    if not counted:
        return lines
    # Below -v, a shared cell is the CELL SHARED line's, said once for every test it concerns.
    unshared = {
        r.text for r in compliance.for_test(t.latin, t.mode) if r.kind is not ReasonKind.CELL_SHARED
    }
    lines += [
        f"  not compliant: {reason}" for reason in t.reasons if verbosity > 0 or reason in unshared
    ]
    return lines


def _once(reasons: Sequence[Reason]) -> list[str]:
    """The reasons' texts, those of shared cells as one, naming every test they concern."""
    shared = [r for r in reasons if r.kind is ReasonKind.CELL_SHARED]
    tests = list(dict.fromkeys(f"{CYRILLIC[r.network]} ({r.network}) {r.mode}" for r in shared))
    texts = []
    for reason in reasons:
        if reason.kind is not ReasonKind.CELL_SHARED:
            texts.append(reason.text)
        elif tests:
            texts.append(f"cell shared: {', '.join(tests)} (the CELL SHARED line above)")
            tests = []
    return texts


def check_line(timing: Timing) -> str:
    """The checks of one test's rounds: how many of its units, at what chance, the verdict
    and the worst array, their time (which the test's does not count), and the power."""
    checks = [(cell.cell, a) for cell in timing.cells for a in cell.checks]
    seconds = sum(cell.check_seconds for cell in timing.cells)
    units = timing.units
    unit = "rounds"
    if units is not None and units.segments:
        unit = "segments"
    elif units is not None and units.length > 1:
        unit = f"units of {units.length} rounds"
    if timing.copy_share is not None:  # what keeping a training unit's copies costs
        unit += f" (the suite's copies: {100 * timing.copy_share:.2g} % of a round)"
    made = len(timing.cells[0].checks)
    each = " on each cell" if len(timing.cells) > 1 else ""
    decided = timing.decided_units(timing.cells[0])
    chance = timing.check_chance
    drawn = "" if chance is None else f" (each with chance {chance:.3g}, drawn after it delivered)"
    failed = timing.failed_checks
    if failed:
        cell, check = failed[0]
        verdict = f"FAILED, {check.subject}: {check.failure}"
    else:
        ratios = [a for _, a in checks if a.worst_ratio is not None]
        worst = max(ratios, key=lambda a: a.worst_ratio, default=None)
        verdict = "passed" + (
            f", worst СКО/СКОП {worst.worst_ratio:.3g} ({worst.subject}: {worst.worst_array})"
            if worst
            else ""
        )
    line = (
        f"checks: {made} of {decided} {unit}{each}{drawn}: {verdict}; "
        f"{seconds:.3g} s, not counted in the time"
    )
    if chance is not None:
        line += f"; {timing.units.power_text(chance)}"
    return line


def spread_line(timing: Timing) -> str:
    """How the test's rounds spread: the median, the slowest against it, and the mean (the
    ОРП's) above it."""
    spread = timing.spread
    side = "above" if spread.mean_above_median >= 0 else "below"
    return (
        f"rounds: median {spread.median_seconds:.3g} s, slowest round "
        f"{spread.slowest_to_median:.3g}x the median, mean (the ОРП's) "
        f"{_percent(abs(spread.mean_above_median))} % {side} the median"
        + (" (NOISY)" if spread.noisy else "")
    )


def contention_line(timing: Timing) -> str:
    """How long the test's threads waited for a core in its timed rounds, on each cell."""
    parts = [
        (f"cell {cell.cell}: " if len(timing.cells) > 1 else "")
        + ("not measured" if cell.contention is None else cell.contention.describe())
        + (" (SHARED)" if cell.contention is not None and cell.contention.shared else "")
        for cell in timing.cells
    ]
    return "during the timed rounds: " + "; ".join(parts)


def shared_line(shared: list[Timing]) -> str:
    """The warning for the tests whose cell other processes shared."""
    tests = ", ".join(
        f"{CYRILLIC[t.latin]} ({t.latin}) {t.mode} "
        + "/".join(f"{100 * c.contention.judged_share:.0f} %" for c in t.shared_cells)
        for t in shared
    )
    return (
        f"CELL SHARED ({tests}): a thread of each of these tests waited for a core more than "
        f"{100 * SHARED_LIMIT:.0f} % of its timed rounds' time: other work held "
        "the cell's cores, so their times are not the cell's own and they are NOT COMPLIANT; "
        "rerun on a quiet machine"
    )


def noisy_line(noisy: list[Timing]) -> str:
    """The warning for the tests whose slow rounds moved their ОРП."""
    tests = ", ".join(
        f"{CYRILLIC[t.latin]} ({t.latin}) {t.mode} {_percent(t.spread.orp_lowered)} %"
        for t in noisy
    )
    return (
        f"NOISY ROUNDS ({tests}): the mean round lies more than "
        f"{100 * NOISY_MEAN_ABOVE_MEDIAN:.0f} % above the median, so slow rounds (another "
        "process on the machine, throttling) lowered these ОРП by the share shown against "
        "the median round's rate; rerun on a quiet machine or with more images"
    )


def _percent(share: float) -> str:
    """A share in percent, to two figures, and never in exponent notation."""
    return f"{100 * share:.2g}" if 100 * share < 10 else f"{100 * share:.0f}"


def seconds_text(seconds: float) -> str:
    """A test's time in the table: three figures (2.00, not 2 for 2.004; 0.0137), whole
    seconds from 100 (12346, not 1.23e+04)."""
    if float(f"{seconds:.3g}") >= 100:
        return f"{seconds:.0f}"
    return f"{seconds:#.3g}"
