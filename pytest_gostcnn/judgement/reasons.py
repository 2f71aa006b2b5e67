"""Why a result is not compliant (standard.md §7.7): a reason's kind, which code acts on,
and its text, which people read."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ReasonKind(enum.Enum):
    """Which condition a reason says is missed, by the few words the run's last line gives
    it: what code outside the judge acts on, never a reason's text."""

    QUICK_PROFILE = "quick profile"
    TIMED_BESIDE_A_BASELINE = "timed beside a baseline"
    RUN_INCOMPLETE = "run incomplete"
    RUN_NOT_ENDED = "run not ended"
    NETWORKS_DESELECTED = "networks deselected"
    NETWORK_NOT_VERIFIED = "network not verified correct"
    LAYER_ITEMS_DESELECTED = "layer items deselected"
    LAYER_ITEMS_FAILED = "layer items failed"
    THRESHOLD_OVERRIDDEN = "СКОП overridden"
    CANONICAL_SET = "canonical set"
    TABLES_PROVENANCE = "tables' provenance"
    NOT_CHECKED = "not checked"
    OUTPUT_REPEATED = "output repeated"
    ORP_ABOVE_PEAK = "ОРП above 100 %"
    PEAK_BELOW_PROBE = "peak below measured rate"
    CHECK_FAILED = "check failed"
    CELL_SHARED = "cell shared"
    ITEMS_FAILED = "items failed"
    EVALUATION_INCOMPLETE = "evaluation incomplete"
    IMAGES = "images"  # --gost-images below section 9.3's count; its words name the count


@dataclass(frozen=True)
class Reason:
    """One condition a result misses, of ``kind``. ``mode`` and ``network`` limit it to the
    results of that mode or network (None: every result); ``evaluation`` ones concern the
    evaluation, not any one test (a missing result)."""

    kind: ReasonKind
    text: str
    mode: str | None = None
    network: str | None = None
    evaluation: bool = False
    words: str | None = None  # the run's last line's, where the kind's own are not enough

    @property
    def short(self) -> str:
        """A few words, for the run's last line."""
        return self.words or self.kind.value
