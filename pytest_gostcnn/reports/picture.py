"""A written report's evaluation drawn (section 9.8): the picture ``plot`` writes.

One panel per evaluated mode: the six ОРП bars in the standard's order М Г В С Р Ш, the
dropped (smallest) one hatched, the first result as a line across them, and beside them the
section 8 verdicts, the designation and whether it is compliant. A plain SVG, built as text,
of a report as ``plot.drawable_report`` checked it.
"""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass
from xml.sax.saxutils import escape

from pytest_gostcnn.backend import backend_label
from pytest_gostcnn.conformance.verification import NOT_CORRECT, PASSED_VERDICTS
from pytest_gostcnn.model.network import CYRILLIC

# Characters XML 1.0 forbids (most control characters): left out of any text drawn.
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

WIDTH = 1000
MARGIN = 20
CHART_LEFT = 80  # room for the axis labels
SLOT = 75  # one network's width on the chart
BAR = 46
CHART_HEIGHT = 200
HEADROOM = 1.1  # the tallest bar stays below the top, with room for its labels
TICKS = 6  # the most steps on the ОРП axis
VERDICTS_LEFT = 700
LINE = 18
WRAP = 125  # characters in a line of text below a chart
CHARACTER_WIDTH = 7.5  # about, of a digit at 13 px: the white under a value label
FONT = "DejaVu Sans, Arial, sans-serif"  # fonts with Cyrillic letters

KEPT_FILL = "#4878a8"
DROPPED_FILL = "url(#dropped)"
RED = "#b02020"  # the first result, an incomplete run, a verdict not correct
GREEN = "#207020"
MISSING_COLOUR = "#909090"


@dataclass(frozen=True)
class Bar:
    """One network's slot on a mode's chart: its ОРП (None: missing, and why)."""

    latin: str
    percent: float | None
    dropped: bool
    why_missing: str = ""
    designation: str = ""


def draw(report: dict) -> str:
    """The picture of ``report`` (as ``drawable_report`` checked it), an SVG document."""
    parts: list[str] = []
    y = MARGIN + LINE
    title = "GOST R 57700.36-2021, section 9.8: evaluation"
    parts.append(_text(MARGIN, y, title, "title", weight="bold", size=16))
    for line in _wrapped(_facts(report)):
        y += LINE
        parts.append(_text(MARGIN, y, line, "facts"))
    if report.get("complete") is False:
        y += LINE
        parts.append(_text(MARGIN, y, "incomplete run", "incomplete", fill=RED))
    verdicts = _verdicts(report)
    for evaluation in report["evaluations"]:
        panel, y = _panel(evaluation, _bars(evaluation, report), verdicts, y + 2 * LINE)
        parts += panel
    height = math.ceil(y + MARGIN)
    return "\n".join(
        [
            '<?xml version="1.0" encoding="UTF-8"?>',
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" font-family="{FONT}" font-size="13">',
            "<defs>",
            '<pattern id="dropped" width="6" height="6" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)">',
            '<rect width="6" height="6" fill="#d8d8d8"/>',
            '<line x1="0" y1="0" x2="0" y2="6" stroke="#808080" stroke-width="2"/>',
            "</pattern>",
            "</defs>",
            f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
            *parts,
            "</svg>",
            "",
        ]
    )


def _facts(report: dict) -> str:
    """The run in one line: the backend, its device, the data type, batch and profile (or
    the image count of ``--gost-images``)."""
    backend = _object(_object(report.get("system")).get("backend"))
    options = _object(report.get("options"))
    given = options.get("backend")
    name = backend_label(str(backend.get("name", given or "unknown")), given)
    backend_text = " ".join(str(part) for part in (name, backend.get("version")) if part)
    device = backend.get("device") or "an unknown device"
    images = options.get("images")
    count = (
        f"profile {options.get('profile', 'unknown')}"
        if images is None
        else f"images {images} per test"
    )
    return (
        f"backend {backend_text} on {device}; dtype {options.get('dtype', 'unknown')}; "
        f"batch {options.get('batch', 'unknown')}; {count}"
    )


def _verdicts(report: dict) -> dict[tuple[str, str], str]:
    """Section 8's verdict of each (network, mode) the report verified."""
    networks = _object(report.get("verification")).get("networks")
    return {
        (record.get("network"), record.get("mode")): str(record.get("verdict"))
        for record in _records(networks)
    }


def _bars(evaluation: dict, report: dict) -> list[Bar]:
    """The six slots of one mode, in the standard's order; a missing one says why, from
    the benchmarks the report holds."""
    mode, results = evaluation["mode"], evaluation["results_percent"]
    missing = set(evaluation.get("missing") or ())
    timed = {
        record.get("network"): record
        for record in _records(report.get("benchmarks"))
        if record.get("mode") == mode
    }
    bars = []
    for latin in CYRILLIC:
        benchmark = timed.get(latin, {})
        designation = str(benchmark.get("designation", ""))
        if latin in results and latin not in missing:
            dropped = evaluation.get("dropped") == latin
            bars.append(Bar(latin, results[latin], dropped, designation=designation))
        elif not benchmark:
            bars.append(Bar(latin, None, False, "not timed"))
        elif benchmark.get("orp_percent") is None:
            bars.append(Bar(latin, None, False, "no ОРП (no peak)", designation))
        else:
            bars.append(Bar(latin, None, False, "not counted", designation))
    return bars


def _panel(
    evaluation: dict, bars: list[Bar], verdicts: dict[tuple[str, str], str], top: float
) -> tuple[list[str], float]:
    """One mode's chart, verdicts and compliance, from ``top``; and where it ends."""
    mode = evaluation["mode"]
    parts = [f'<g class="mode" data-mode="{_escape(mode)}">']
    heading = f"{mode}: {evaluation.get('designation') or 'no designation'}"
    parts.append(_text(MARGIN, top, heading, "heading", weight="bold"))
    chart_top = top + 2 * LINE
    baseline = chart_top + CHART_HEIGHT
    first = evaluation.get("first_result_percent")
    values = [bar.percent for bar in bars if bar.percent is not None]
    axis_top, step = _axis(max(values, default=0.0))
    scale = CHART_HEIGHT / axis_top
    parts += _axis_lines(chart_top, baseline, axis_top, step)
    labels = []
    for position, bar in enumerate(bars):
        shapes, values = _bar(bar, CHART_LEFT + position * SLOT, chart_top, baseline, scale)
        parts += shapes
        labels += values
    chart_right = CHART_LEFT + len(bars) * SLOT
    if first is not None:
        line_y = baseline - first * scale
        parts.append(
            f'<line class="first-result" x1="{CHART_LEFT}" y1="{line_y:.2f}" '
            f'x2="{chart_right}" y2="{line_y:.2f}" stroke="{RED}" '
            'stroke-width="2" stroke-dasharray="8 4"/>'
        )
        label = f"first result {first:.3g} %"
        parts.append(_text(chart_right + 6, line_y + 4, label, "first-result-label"))
    parts += labels  # over the first result's line
    parts += _verdict_column(mode, verdicts, chart_top)
    y = baseline + 2.5 * LINE
    for line in _wrapped(_evaluation_line(evaluation, bars)):
        parts.append(_text(MARGIN, y, line, "evaluation"))
        y += LINE
    for line in _wrapped(_compliance(evaluation)):
        parts.append(_text(MARGIN, y, line, "compliance"))
        y += LINE
    parts.append("</g>")
    return parts, y


def _axis(largest: float) -> tuple[float, float]:
    """The axis's top and step: the least step of 1, 2, 2.5 or 5 times a power of ten
    that reaches the largest value with headroom in at most ``TICKS`` steps."""
    wanted = largest * HEADROOM
    if wanted <= 0:
        return 1.0, 0.2
    power = 10.0 ** math.floor(math.log10(wanted / TICKS))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if wanted / (m * power) <= TICKS)
    return math.ceil(wanted / step) * step, step


def _axis_lines(chart_top: float, baseline: float, axis_top: float, step: float) -> list[str]:
    parts = []
    for tick in range(round(axis_top / step) + 1):
        value = tick * step
        y = baseline - value / axis_top * (baseline - chart_top)
        right = CHART_LEFT + len(CYRILLIC) * SLOT
        parts.append(
            f'<line class="grid" x1="{CHART_LEFT}" y1="{y:.2f}" x2="{right}" y2="{y:.2f}" '
            f'stroke="{"#404040" if tick == 0 else "#e4e4e4"}"/>'
        )
        label = f"{round(value, 12):g} %"
        parts.append(_text(CHART_LEFT - 6, y + 4, label, "tick", anchor="end"))
    parts.append(
        f'<line x1="{CHART_LEFT}" y1="{chart_top}" x2="{CHART_LEFT}" y2="{baseline}" '
        'stroke="#404040"/>'
    )
    label_y = (chart_top + baseline) / 2
    parts.append(
        f'<text x="{MARGIN}" y="{label_y:.2f}" transform="rotate(-90 {MARGIN} {label_y:.2f})" '
        'text-anchor="middle" dominant-baseline="hanging">ОРП</text>'
    )
    return parts


def _bar(
    bar: Bar, left: float, chart_top: float, baseline: float, scale: float
) -> tuple[list[str], list[str]]:
    """One slot: a bar at the network's ОРП (hatched when dropped), or a dashed frame
    saying it is missing, with the network's letter below; and the bar's value labels, drawn
    apart so that they lie over the first result's line, on white."""
    middle = left + SLOT / 2
    x = middle - BAR / 2
    name = f"{CYRILLIC[bar.latin]} ({bar.latin})"
    kind = "missing" if bar.percent is None else "dropped" if bar.dropped else "kept"
    shapes = [f'<g class="network {kind}" data-network="{bar.latin}">']
    tip = f"{name}: " + (bar.why_missing if bar.percent is None else f"ОРП {bar.percent:.3g} %")
    shapes.append(f"<title>{_escape(' '.join(filter(None, [tip, bar.designation])))}</title>")
    labels = []
    if bar.percent is None:
        shapes.append(
            f'<rect class="bar missing" x="{x:.2f}" y="{chart_top}" width="{BAR}" '
            f'height="{CHART_HEIGHT}" fill="none" stroke="{MISSING_COLOUR}" '
            'stroke-dasharray="4 3"/>'
        )
        middle_y = chart_top + CHART_HEIGHT / 2
        shapes.append(_text(middle, middle_y, "missing", "missing-label", anchor="middle"))
        shapes.append(
            _text(middle, middle_y + LINE, bar.why_missing, "missing-why", anchor="middle", size=10)
        )
    else:
        height = bar.percent * scale
        fill = DROPPED_FILL if bar.dropped else KEPT_FILL
        shapes.append(
            f'<rect class="bar {kind}" x="{x:.2f}" y="{baseline - height:.2f}" width="{BAR}" '
            f'height="{height:.2f}" fill="{fill}" stroke="#303030" stroke-width="0.5"/>'
        )
        value_y = baseline - height - 5
        value = f"{bar.percent:.3g} %"
        under = len(value) * CHARACTER_WIDTH + 4
        labels.append(f'<g class="values" data-network="{bar.latin}">')
        labels.append(
            f'<rect x="{middle - under / 2:.2f}" y="{value_y - 12:.2f}" width="{under:.2f}" '
            'height="16" fill="white"/>'
        )
        labels.append(_text(middle, value_y, value, "value", anchor="middle"))
        if bar.dropped:
            labels.append(_text(middle, value_y - 15, "dropped", "dropped-label", anchor="middle"))
        labels.append("</g>")
    shapes.append(_text(middle, baseline + LINE, name, "network-label", anchor="middle"))
    shapes.append("</g>")
    return shapes, labels


def _verdict_column(mode: str, verdicts: dict[tuple[str, str], str], top: float) -> list[str]:
    parts = [_text(VERDICTS_LEFT, top, f"section 8 verdicts, {mode}", "verdicts", weight="bold")]
    for row, latin in enumerate(CYRILLIC, 1):
        verdict = verdicts.get((latin, mode), "no verdict")
        colour = GREEN if verdict in PASSED_VERDICTS else RED if verdict == NOT_CORRECT else ""
        y = top + row * LINE * 1.2
        parts.append(_text(VERDICTS_LEFT, y, f"{CYRILLIC[latin]} ({latin})", "verdict-network"))
        parts.append(_text(VERDICTS_LEFT + 70, y, verdict, "verdict", fill=colour or "#606060"))
    return parts


def _evaluation_line(evaluation: dict, bars: list[Bar]) -> str:
    """The first result and the dropped test in words; or what is missing for them."""
    first, dropped = evaluation.get("first_result_percent"), evaluation.get("dropped")
    marked = [bar for bar in bars if bar.dropped]
    if first is None or not marked:
        missing = [bar.latin for bar in bars if bar.percent is None]
        if not missing:
            return "no first result in the report"
        names = ", ".join(f"{CYRILLIC[latin]} ({latin})" for latin in missing)
        return f"no first result: no result for {names}"
    return (
        f"first result {first:.3g} %: the mean of the five kept; "
        f"dropped (smallest) {CYRILLIC[dropped]} ({dropped}) {marked[0].percent:.3g} %"
    )


def _compliance(evaluation: dict) -> str:
    if evaluation.get("compliant") is True:
        return "compliant"
    reasons = [str(reason) for reason in evaluation.get("noncompliance_reasons") or []]
    if evaluation.get("compliant") is not False:
        return "compliance not stated in the report"
    if not reasons:
        return "not compliant"
    more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
    return f"not compliant: {reasons[0]}{more}"


def _object(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _records(value: object) -> list[dict]:
    if not isinstance(value, list):
        return []
    return [record for record in value if isinstance(record, dict)]


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, WRAP, break_long_words=True) or [""]


def _escape(text: object) -> str:
    """``text`` as XML character data or a double-quoted attribute's value."""
    return escape(NOT_XML.sub("", str(text)), {'"': "&quot;"})


def _text(
    x: float,
    y: float,
    content: object,
    kind: str,
    *,
    anchor: str = "start",
    weight: str = "normal",
    fill: str = "#202020",
    size: int = 13,
) -> str:
    return (
        f'<text class="{kind}" x="{x:.2f}" y="{y:.2f}" text-anchor="{anchor}" '
        f'font-weight="{weight}" font-size="{size}" fill="{fill}">{_escape(content)}</text>'
    )
