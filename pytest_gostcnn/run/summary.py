"""The terminal summary's lines about the whole run: why nothing was verified, how far it
got, the terms in words, and the last lines (section 8's verdict, each evaluation's result).
Each section's own lines are in ``verification_summary.py``, ``performance_summary.py`` and
``comparison_summary.py``.

Only rendering: the verdicts, timings and evaluations are computed where they live.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_gostcnn.judgement.evaluation import Evaluation
from pytest_gostcnn.machine.peak import si
from pytest_gostcnn.model.network import CYRILLIC
from pytest_gostcnn.performance.designations import MODE_LETTERS, transliterate

from .options import Options
from .performance_summary import seconds_text
from .resolution import Resolved
from .results import Conclusion, Results

LAST_LINE_PREFIX = "GOST R 57700.36-2021: "  # begins each of the run's last lines


def nothing_verified(options: Options, resolved: Resolved, results: Results) -> list[str]:
    """Why a run with ``--gost-*`` options verified nothing, when it did not: a run that
    skipped or never collected the suite must not pass for a verified one."""
    if results.verified.any:
        return []
    if not results.selection.collected:
        if "backend" not in options.given:
            return [
                "--gost-* options were given but the suite did not run: it runs when "
                "--gost-backend=NAME is given without test paths"
            ]
        return ["the suite did not run: it runs when --gost-backend is given without test paths"]
    if resolved.backend is None:
        return [
            f"NOTHING WAS VERIFIED: backend {resolved.backend_label} is unavailable "
            f"({resolved.unavailable}); every item of the suite was skipped"
        ]
    return []


def stopped_lines(state: dict, resumed: str | None) -> list[str]:
    """What a run that did not reach its end was: which performance tests finished, which
    did not, the test it stopped in; and which tests a resumed run did not time again."""
    lines = []
    if state["resumed_from"]:
        tests = state["resumed_from"]["tests"]
        lines.append(
            f"RESUMED from --gost-resume={resumed} (written {state['resumed_from']['created']}): "
            f"{len(tests)} performance test{'s' * (len(tests) != 1)} kept from it, not timed "
            "again: " + (", ".join(tests) or "none (it finished none)")
        )
        continued = state["resumed_from"].get("continued")
        if continued:
            lines.append(
                f"  {continued['test']} went on from its checkpoint: its first "
                f"{continued['timed_rounds_kept']} timed rounds (times and checks) are the "
                "stopped run's"
            )
    if state["complete"]:
        return lines
    why = state["stopped"] or "not every selected item ran"
    finished, unfinished = state["finished"], state["unfinished"]
    lines.append(
        f"RUN INCOMPLETE ({why}): {len(finished)} of {len(finished) + len(unfinished)} "
        "performance tests finished; NOT COMPLIANT because incomplete"
    )
    lines.append("  finished: " + (", ".join(finished) or "none"))
    lines.append("  not finished: " + (", ".join(unfinished) or "none"))
    if state["other_items_not_run"]:
        lines.append(f"  other items of the suite not run: {state['other_items_not_run']}")
    where, partial = state["stopped_in"], state.get("partial")
    if where:
        lines.append(
            f"  stopped in {where['test']} after {where['timed_rounds_done']} of "
            f"{where['rounds']} timed rounds: not a result, it is timed again when resumed"
            if partial is None or partial["test"] != where["test"]
            else f"  stopped in {where['test']} after {where['timed_rounds_done']} of "
            f"{where['rounds']} timed rounds: not a result; the report keeps it after timed "
            f"round {partial['timed_rounds_done']}, where --gost-resume goes on"
        )
    elif partial is not None:
        lines.append(
            f"  kept part-way: {partial['test']} after timed round "
            f"{partial['timed_rounds_done']} of {partial['rounds']}, where --gost-resume goes on"
        )
    return lines


def terms(resolved: Resolved, modes: Sequence[str]) -> list[str]:
    """The summary's words, once, for a reader without Russian, and every designation of
    the run in Latin letters."""
    networks = "; ".join(f"{n.letter} ({n.latin}) {n.name}" for n in resolved.networks.values())
    mode_words = ", ".join(
        f"{MODE_LETTERS[mode]} ({transliterate(MODE_LETTERS[mode])}) {mode}" for mode in modes
    )
    named = [
        f"ТП-{n.letter}-{MODE_LETTERS[mode]}" for n in resolved.networks.values() for mode in modes
    ] + [f"ОП-{MODE_LETTERS[mode]}" for mode in modes]
    return [
        "terms: СКО = root-mean-square error against the float64 reference; СКОП = the "
        "admissible СКО (a verdict holds while СКО/СКОП < 1); ОРП = relative real "
        "performance, the MAC/s a test reached as a share of the cells' theoretical peak",
        "designations: ТП-<network>-<mode>-<type>-B<batch> = a performance test, "
        "ОП-<mode>-<type>-B<batch>-N<cells> = an evaluation over N computing cells; "
        f"mode {mode_words}; networks {networks}",
        "in Latin letters: " + ", ".join(f"{d} = {transliterate(d)}" for d in named),
    ]


def _counted(noun: str, selected: int, ran: Sequence) -> str:
    """How many of the selected verifications of one kind failed, passed, did not run."""
    failed = sum(v.failed for v in ran)
    total = max(selected, len(ran))
    if not total:
        return f"{noun}s not run"
    of = f"{total} selected {noun}{'s' * (total != 1)}"
    if not ran:
        return f"{of} not run"
    text = f"{failed} of {of} failed" if failed else f"{len(ran)} of {of} passed"
    return text + (f", {total - len(ran)} not run" if len(ran) < total else "")


def last_line(results: Results, conclusion: Conclusion) -> str:
    """One line, like HPL's end: section 8 PASSED, FAILED, INCOMPLETE or NOT RUN with how
    many of the selected layer steps and networks ran and passed; the evaluations follow it,
    a line each (``evaluation_line``)."""
    failed_elsewhere = any(
        item.startswith(("test_layer", "test_network"))
        for report in results.reported.cell_reports
        for item, _ in report["failures"]
    )
    verified = results.verified.layers + list(results.verified.networks.values())
    networks = list(results.verified.networks.values())
    selected = results.selection.layer_steps + len(results.selection.networks)
    if any(v.failed for v in verified) or failed_elsewhere:
        verdict = "FAILED"
    elif not verified:
        verdict = "NOT RUN"
    else:  # PASSED only for all that was selected: a stopped run passed only what ran
        verdict = "PASSED" if len(verified) >= selected else "INCOMPLETE"
    counts = [
        _counted("layer step", results.selection.layer_steps, results.verified.layers),
        _counted("network", len(results.selection.networks), networks),
    ]
    line = f"{LAST_LINE_PREFIX}verification {verdict}: " + "; ".join(counts)
    if not conclusion.evaluations:
        line += "; no evaluation (no benchmark ran)"
    return line


def evaluation_line(evaluation: Evaluation) -> str:
    """One evaluation on a line of its own, as HPL prints a result: its designation, first
    and second results (or why there are none), COMPLIANT or NOT COMPLIANT and why."""
    if evaluation.complete:
        result = (
            f"first result {evaluation.first:.3g} %, second result {si(evaluation.second)}MAC/s"
        )
    else:
        missing = ", ".join(f"{CYRILLIC[latin]} ({latin})" for latin in evaluation.missing)
        result = f"incomplete, no result for {missing}"
    word = "COMPLIANT" if evaluation.compliant else f"NOT COMPLIANT ({evaluation.summary})"
    return (
        f"{LAST_LINE_PREFIX}{evaluation.mode} evaluation {evaluation.designation}: {result}: {word}"
    )


def suite_time_line(results: Results, cells: int = 1) -> str:
    """The suite's own time beside the timed rounds', on cell 0 (where the summary is): the
    checks, section 8's verification, what the tests did around their timed rounds and the
    checkpoints (``Results.suite_seconds``), against this run's timed rounds."""
    work = results.suite_seconds.as_dict()
    timed = sum(
        timing.cells[0].seconds
        for key, timing in results.timings.items()
        if key not in results.earlier.timings
    )
    verification = work["layer_verification"] + work["network_verification"]
    whose = "cell 0's " if cells > 1 else ""
    shown = {kind: f"{seconds_text(s)} s" for kind, s in work.items()}
    return (
        f"the suite's own time ({whose}beside {seconds_text(timed)} s of timed rounds): "
        f"{seconds_text(sum(work.values()))} s: checks {shown['checks']}, section 8's "
        f"verification {seconds_text(verification)} s (layer steps "
        f"{shown['layer_verification']}, networks {shown['network_verification']}), around the "
        f"timed rounds {shown['round_setup']} (loading, warm-up, each round's setup), "
        f"checkpoints {shown['checkpoints']}"
    )
