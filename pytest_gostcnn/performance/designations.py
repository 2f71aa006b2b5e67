"""The project's designations of a test and of an evaluation (docs/notation.md).

The standard's Figures 3 and 4, which define them, are lost (standard.md §7). A result that
is not compliant (standard.md §7.7) says so in its designation.
"""

from __future__ import annotations

from pytest_gostcnn.model.network import CYRILLIC, LATIN
from pytest_gostcnn.model.table_files import CANONICAL_SET, DEFAULT_TABLE_SET

MODE_LETTERS = {"training": "О", "inference": "П"}  # обучение, применение
# The Cyrillic letters of the designations in Latin ones (Р, В, С, М look like P, B, C, M).
TRANSLITERATION = {"Т": "T", "О": "O", "П": "P", **LATIN}


def transliterate(designation: str) -> str:
    """A designation in Latin letters: ``ТП-Ш-П`` is ``TP-Sh-P``."""
    return "".join(TRANSLITERATION.get(letter, letter) for letter in designation)


def compliance_label(
    meets_image_count: bool, compliant: bool, table_set: str, images: int | None
) -> str:
    """`` (quick, non-compliant)``, `` (images=5000, non-compliant)`` (``--gost-images``
    below section 9.3's count), `` (non-compliant)`` or nothing; a result on the canonical
    set names it: `` (canonical set, quick, non-compliant)``."""
    if meets_image_count and compliant:
        return ""
    parts = ["canonical set"] if table_set == CANONICAL_SET else []
    if not meets_image_count:
        parts.append("quick" if images is None else f"images={images}")
    return f" ({', '.join([*parts, 'non-compliant'])})"


def benchmark_name(latin: str, mode: str, dtype: str, batch: int) -> str:
    """The test a designation names, without its compliance: ``ТП-Р-О-float32-B16``."""
    return f"ТП-{CYRILLIC[latin]}-{MODE_LETTERS[mode]}-{dtype}-B{batch}"


def designate_test(
    latin: str,
    mode: str,
    dtype: str,
    batch: int,
    meets_image_count: bool,
    compliant: bool,
    table_set: str = DEFAULT_TABLE_SET,
    images: int | None = None,
) -> str:
    """The designation of one test's result, e.g. ``ТП-Р-О-float32-B16``; ``images``: the
    ``--gost-images`` count, when it chose the rounds instead of a profile."""
    label = compliance_label(meets_image_count, compliant, table_set, images)
    return benchmark_name(latin, mode, dtype, batch) + label
