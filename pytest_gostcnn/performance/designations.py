"""The project's designations of a test and of an evaluation (docs/notation.md).

The standard's Figures 3 and 4, which define them, are lost (standard.md §7).
"""

from __future__ import annotations

from pytest_gostcnn.model.network import CYRILLIC

MODE_LETTERS = {"training": "О", "inference": "П"}  # обучение, применение


def designate_test(latin: str, mode: str, dtype: str, batch: int, compliant: bool) -> str:
    """The designation of one test, e.g. ``ТП-Р-О-float32-B16``."""
    text = f"ТП-{CYRILLIC[latin]}-{MODE_LETTERS[mode]}-{dtype}-B{batch}"
    return text if compliant else f"{text} (quick, non-compliant)"


def designate_evaluation(mode: str, dtype: str, batch: int, cells: int, compliant: bool) -> str:
    """The designation of an evaluation, e.g. ``ОП-О-float32-B16-N1``."""
    text = f"ОП-{MODE_LETTERS[mode]}-{dtype}-B{batch}-N{cells}"
    return text if compliant else f"{text} (quick, non-compliant)"
