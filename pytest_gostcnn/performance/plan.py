"""Section 9: the plan of a test's timed rounds, chosen by a profile (standard.md §7.7) or
by an image count (``--gost-images=N``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .timing import FULL_PROFILE_IMAGES

PROFILES = ("quick", "full")
# The quick profile: enough images for a stable mean on a CPU, few enough that all six
# networks in both modes run in minutes. Its results are never compliant (9.3 wants 10^6).
QUICK_IMAGES = 16
QUICK_MIN_ROUNDS = 3
WARMUP_ROUNDS = 1


@dataclass(frozen=True)
class Plan:
    """The timed rounds of one test on one cell: chosen by a profile, or by an image count
    (``requested``, ``--gost-images=N``; then ``profile`` is None)."""

    profile: str | None
    rounds: int
    warmup_rounds: int
    batch: int
    requested: int | None = None

    @property
    def images(self) -> int:
        return self.rounds * self.batch

    @property
    def label(self) -> str:
        """What chose the rounds, as the labels say it: ``quick``, ``full``, ``images=N``."""
        return self.profile if self.requested is None else f"images={self.requested}"


def plan(profile: str, batch: int, images: int | None = None) -> Plan:
    """The rounds of a test: ceil(images / B) for an image count of at least one batch
    (which replaces the profile; ``run/resolution.py`` checks it), else the profile's."""
    if images is not None:
        return Plan(None, math.ceil(images / batch), WARMUP_ROUNDS, batch, images)
    if profile == "full":
        rounds = math.ceil(FULL_PROFILE_IMAGES / batch)
    else:
        rounds = max(QUICK_MIN_ROUNDS, math.ceil(QUICK_IMAGES / batch))
    return Plan(profile, rounds, WARMUP_ROUNDS, batch)
