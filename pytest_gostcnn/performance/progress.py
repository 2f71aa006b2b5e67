"""What one test says of itself as its rounds run: to the run's estimate, that it began and
that its warm-up ended (and the total the estimate then gives), and every 10 s how far it
is (``estimate.progress_line``). The loop hands its lines to the caller between rounds."""

from __future__ import annotations

import time

from pytest_gostcnn.model.network import Network

from .estimate import RunEstimate, progress_line
from .plan import Plan
from .timed_test import subject
from .timing import macs_per_image


class TestProgress:
    """The progress of ``network`` in ``mode`` over ``plan``'s rounds, a resumed test's
    first ``start`` timed rounds kept from its stopped run; ``estimate``, the run's."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(
        self,
        network: Network,
        mode: str,
        plan: Plan,
        start: int = 0,
        estimate: RunEstimate | None = None,
    ) -> None:
        self.network, self.mode, self.plan, self.start = network, mode, plan, start
        self.estimate = estimate
        self.key = (network.latin, mode)
        self.lines: list[str] = []  # not yet told (``said``)
        self.started = time.monotonic()
        self.last_line = self.started

    def setting_up(self, calls: int) -> None:
        """Round ``calls`` (from 1, the warm-up's first) is being set up: the estimate is
        told the test began, or that its warm-up ended, and its total becomes a line."""
        if self.estimate is None:
            return
        warmup = self.plan.warmup_rounds
        if calls == 1:
            self.estimate.began(self.key)
        if calls == warmup + 1:
            images = warmup * self.plan.batch
            line = self.estimate.warmed_up(
                self.key, macs_per_image(self.network, self.mode) * images
            )
            if line is not None:
                self.lines.append(line)

    def set_up(self, images: int, checked_seconds: float, every: float = 10.0) -> None:
        """``images`` are set up so far (a resumed test's counted) and this run's checks
        took ``checked_seconds``: a line, at most one every ``every`` seconds."""
        now = time.monotonic()
        if now - self.last_line < every:
            return
        self.last_line = now
        plan = self.plan
        total = (plan.rounds + plan.warmup_rounds) * plan.batch
        kept = self.start * plan.batch  # a resumed test's, which neither rate nor estimate counts
        # The rounds' time, setup included and this run's checks not: the checks' time is
        # the run estimate's, after the "; ".
        rounds = now - self.started - checked_seconds
        line = progress_line(subject(self.network, self.mode), images, total, kept, rounds)
        if self.estimate is not None:
            line += "; " + self.estimate.status(self.key, (images - kept) / (total - kept))
        self.lines.append(line)

    def said(self) -> list[str]:
        """The lines made since last asked."""
        lines, self.lines = self.lines, []
        return lines
