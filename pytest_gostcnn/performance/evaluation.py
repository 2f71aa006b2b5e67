"""Section 9: relative real performance (ОРП) of each test, and the evaluation of the system.

ОРП (3.9, 9.5) = real performance / theoretical peak, in percent, where real performance is
the MACs the test did (the project's Table 1 count per image, times the images) over the
time it took. The evaluation (9.8) drops the single smallest of the six results and
averages the other five: the first result, in percent; the second result is the first times
the system's peak over 100, in MAC/s. The designations follow the project's notation,
``docs/notation.md`` (the standard's Figures 3 and 4 are lost).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_gostcnn.machine.peak import si
from pytest_gostcnn.model.network import CYRILLIC, LATIN

MODE_LETTERS = {"training": "О", "inference": "П"}  # обучение, применение
FULL_PROFILE_IMAGES = 1_000_000  # section 9.3: each cell's own set of 1,000,000 images


def relative_real_performance(
    macs_per_image: int, images: int, seconds: float, peak_macs_per_second: float
) -> float:
    """ОРП in percent: (MACs per image x images) / time / peak x 100."""
    if seconds <= 0 or peak_macs_per_second <= 0:
        raise ValueError("time and peak must be positive")
    return 100.0 * macs_per_image * images / seconds / peak_macs_per_second


def designate_test(latin: str, mode: str, dtype: str, batch: int, compliant: bool) -> str:
    """The project's designation of one test, e.g. ``ТП-Р-О-float32-B16``."""
    text = f"ТП-{CYRILLIC[latin]}-{MODE_LETTERS[mode]}-{dtype}-B{batch}"
    return text if compliant else f"{text} (quick, non-compliant)"


def designate_evaluation(mode: str, dtype: str, batch: int, cells: int, compliant: bool) -> str:
    """The project's designation of an evaluation, e.g. ``ОП-О-float32-B16-N1``."""
    text = f"ОП-{MODE_LETTERS[mode]}-{dtype}-B{batch}-N{cells}"
    return text if compliant else f"{text} (quick, non-compliant)"


@dataclass(frozen=True)
class Evaluation:
    """Section 9.8 over the six results of one mode; ``first`` is None when any is missing."""

    mode: str
    results: Mapping[str, float]  # Latin id -> ОРП in percent
    missing: tuple[str, ...]
    dropped: str | None
    first: float | None  # percent
    second: float | None  # MAC/s

    @property
    def complete(self) -> bool:
        return not self.missing


def evaluate(mode: str, results: Mapping[str, float], system_peak: float) -> Evaluation:
    """Drop the single smallest of the six ОРП results and average the other five.

    With equal smallest results one of them is dropped (the first in the standard's order
    М, Г, В, С, Р, Ш); the average is the same whichever. With fewer than six results there
    is no score: the evaluation lists what is missing.
    """
    missing = tuple(latin for latin in LATIN.values() if latin not in results)
    ordered = {latin: results[latin] for latin in LATIN.values() if latin in results}
    if missing:
        return Evaluation(mode, ordered, missing, None, None, None)
    dropped = min(ordered, key=ordered.__getitem__)
    kept = [value for latin, value in ordered.items() if latin != dropped]
    first = sum(kept) / len(kept)
    return Evaluation(mode, ordered, (), dropped, first, first * system_peak / 100.0)


def describe(evaluation: Evaluation) -> list[str]:
    """The evaluation's lines: results, dropped test, first and second results."""
    lines = [
        "results (ОРП): "
        + (", ".join(f"{CYRILLIC[k]} {v:.3g}%" for k, v in evaluation.results.items()) or "none")
    ]
    if not evaluation.complete:
        names = ", ".join(f"{CYRILLIC[k]} ({k})" for k in evaluation.missing)
        lines.append(f"incomplete: no result for {names}; no evaluation is computed")
        return lines
    dropped = evaluation.dropped
    lines += [
        f"dropped (smallest): {CYRILLIC[dropped]} ({dropped}) {evaluation.results[dropped]:.3g}%",
        f"first result: {evaluation.first:.3g} %",
        f"second result: {si(evaluation.second)}MAC/s",
    ]
    return lines
