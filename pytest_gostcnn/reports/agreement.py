"""How ``check`` holds a figure a report states against the one it recomputes."""

from __future__ import annotations

import math

RELATIVE = 1e-9  # figures agree within this share: JSON keeps every float exactly


def agrees(stated: object, computed: object) -> bool:
    if isinstance(stated, int | float) and isinstance(computed, int | float):
        if isinstance(stated, bool) or isinstance(computed, bool):
            return stated == computed
        return math.isclose(stated, computed, rel_tol=RELATIVE, abs_tol=0.0)
    return stated == computed


def compare_figures(found: list[str], where: str, stated: dict, computed: dict) -> None:
    for key, value in computed.items():
        written = stated.get(key)
        if agrees(written, value):
            continue
        if isinstance(written, list) and isinstance(value, list):  # name what differs
            lacks = [item for item in value if item not in written]
            adds = [item for item in written if item not in value]
            found.append(
                f"{where}: {key} lacks {lacks or 'nothing'} and has {adds or 'nothing'} beyond "
                "what is recomputed"
            )
        else:
            found.append(f"{where}: {key} is {written!r}, recomputed {value!r}")
