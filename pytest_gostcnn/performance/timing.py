"""Section 9: what one test measured on every cell, and its ОРП (standard.md §7).

ОРП (3.9, 9.5) = real performance / theoretical peak, in percent, where real performance is
the MACs the test did (Table 1's count per image, times the images) over the time it took.
With several cells the system's time is the slowest cell's, round by round.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pytest_gostcnn.machine.peak import Peak
from pytest_gostcnn.model.complexity import inference_macs, training_macs
from pytest_gostcnn.model.network import CYRILLIC, Network
from pytest_gostcnn.model.table_files import DEFAULT_TABLE_SET

from .checks import CHEAT_SHARES, Units
from .contention import Contention
from .designations import benchmark_name, designate_test
from .probe import Probe
from .spread import Spread

FULL_PROFILE_IMAGES = 1_000_000  # section 9.3: each cell's own set of 1,000,000 images


def relative_real_performance(
    macs_per_image: int, images: int, seconds: float, peak_macs_per_second: float
) -> float:
    """ОРП in percent: (MACs per image x images) / time / peak x 100."""
    if seconds <= 0 or peak_macs_per_second <= 0:
        raise ValueError("time and peak must be positive")
    return 100.0 * macs_per_image * images / seconds / peak_macs_per_second


@dataclass(frozen=True)
class Check:
    """One check of timed rounds (standard.md §7.7): section 8's comparison on their own
    data, one image of an inference round or a training unit (k rounds of a segment)."""

    round: int  # the timed round checked, or the unit's first, from 1
    passed: bool
    verdict: str
    worst_array: str | None
    worst_ratio: float | None  # СКО / СКОП of the worst array; None when not comparable
    failure: str | None  # the first failing array, or why the check could not compare
    seconds: float = 0.0  # the check's time, never counted in the test's
    rounds: int = 1  # the rounds judged: 1, or the unit's
    image: int | None = None  # inference: the image of the round judged, from 0
    keys: tuple[str, ...] = ()  # each judged round's data key (hex), to rebuild its data

    @property
    def last_round(self) -> int:
        return self.round + self.rounds - 1

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "keys": list(self.keys)}

    @classmethod
    def from_dict(cls, data: dict) -> Check:
        return cls(**{**data, "keys": tuple(data.get("keys", ()))})

    def describe(self) -> str:
        what = self.subject
        if self.passed:
            return f"{what}: {self.verdict}"
        return f"{what}: {self.verdict}: {self.failure}"

    @property
    def subject(self) -> str:
        """ "round 7, image 1" or "rounds 17-19" (a unit of several)."""
        if self.rounds > 1:
            return f"rounds {self.round}-{self.last_round}"
        if self.image is not None:
            return f"round {self.round}, image {self.image}"
        return f"round {self.round}"


@dataclass(frozen=True)
class CellTiming:
    """One computing cell's measurement of one test: every timed round's seconds, and
    the checks of its drawn rounds (their time apart)."""

    cell: int
    device: str
    images: int
    round_seconds: tuple[float, ...]
    peak: Peak | None
    first_image: str  # a checksum of the cell's first timed image: cells must differ
    checks: tuple[Check, ...] = ()
    check_seconds: float = 0.0  # replaying and checking the checked rounds: not timed
    # What the cell's cores did during the timed rounds; None in a report that predates it.
    contention: Contention | None = None
    # Each timed round's delivered output named by its hash (None: the round delivered
    # nothing); () in a report that predates them.
    fingerprints: tuple[str | None, ...] = ()
    probe: Probe | None = None  # the backend's best rate before the rounds (probe.py)

    @property
    def seconds(self) -> float:
        return sum(self.round_seconds)

    @property
    def spread(self) -> Spread:
        return Spread.of(self.round_seconds)

    def as_dict(self) -> dict:
        """The cell's measurement with every round's seconds: a reader recomputes the
        test's time and ОРП from them (``python -m pytest_gostcnn check``)."""
        return {
            "cell": self.cell,
            "device": self.device,
            "images": self.images,
            "seconds": self.seconds,
            "round_seconds": list(self.round_seconds),
            "fingerprints": list(self.fingerprints),
            "peak": self.peak.as_dict() if self.peak else None,
            "first_image_crc32": self.first_image,
            "checks": [check.as_dict() for check in self.checks],
            "check_seconds": self.check_seconds,
            "spread": self.spread.as_dict(),
            "contention": self.contention.as_dict() if self.contention else None,
            "probe": self.probe.as_dict() if self.probe else None,
        }

    @classmethod
    def from_dict(cls, data: dict) -> CellTiming:
        """The measurement ``as_dict`` wrote; what it derived (the sum) is recomputed."""
        return cls(
            cell=data["cell"],
            device=data["device"],
            images=data["images"],
            round_seconds=tuple(data["round_seconds"]),
            peak=Peak.from_dict(data["peak"]) if data["peak"] else None,
            first_image=data["first_image_crc32"],
            checks=tuple(Check.from_dict(a) for a in data["checks"]),
            check_seconds=data["check_seconds"],
            contention=Contention.from_dict(data["contention"]) if data.get("contention") else None,
            fingerprints=tuple(data.get("fingerprints", ())),
            probe=Probe.from_dict(data["probe"]) if data.get("probe") else None,
        )


def system_seconds(cells: tuple[CellTiming, ...]) -> float:
    """The system's time: every round starts on all cells together (a barrier) and ends
    when the slowest cell ends it, so the rounds' maxima add up."""
    return sum(max(times) for times in zip(*(c.round_seconds for c in cells), strict=True))


@dataclass(frozen=True)
class Timing:
    """One performance test over every cell (section 9.3), and its ОРП.

    The system's ОРП is all cells' MACs / (the system's time x the sum of the cells' peaks).
    What the judge decides (``pytest_gostcnn/judgement/``) is filled in once the run's
    report is judged: ``reasons`` (why the result is not compliant), ``comment`` (9.7), and
    what the designation names (the image count met, the table set, ``--gost-images``).
    """

    latin: str
    mode: str
    dtype: str
    batch: int
    rounds: int
    macs_per_image: int
    cells: tuple[CellTiming, ...]
    # Training's data (performance/training_data.py): rounds per segment from the drawn weights,
    # and the output residual's scale; None for inference, or in a report that predates them.
    segment_rounds: int | None = None
    residual_scale: float | None = None
    # Training's checks: the rounds of a unit (k), None in a report from before units of
    # rounds (a unit was a segment); the warm-up's copy of the weights as a share of its
    # round, which set k (None where k was fixed, or in an earlier report).
    unit_rounds: int | None = None
    copy_share: float | None = None
    # The judge's.
    reasons: tuple[str, ...] = ()
    comment: str = ""
    meets_image_count: bool = False  # the rounds hold section 9.3's 1,000,000 images per cell
    table_set: str = DEFAULT_TABLE_SET  # the shipped set's name, or "user"
    requested_images: int | None = None  # --gost-images, when it chose the rounds

    @property
    def compliant(self) -> bool:
        return not self.reasons

    @property
    def images(self) -> int:
        return sum(c.images for c in self.cells)

    @property
    def seconds(self) -> float:
        return system_seconds(self.cells)

    @property
    def round_seconds(self) -> tuple[float, ...]:
        """The system's rounds, each the slowest cell's."""
        rounds = zip(*(c.round_seconds for c in self.cells), strict=True)
        return tuple(max(times) for times in rounds)

    @property
    def spread(self) -> Spread:
        """The spread of the system's rounds."""
        return Spread.of(self.round_seconds)

    @property
    def failed_checks(self) -> list[tuple[int, Check]]:
        """(cell, check) of every check that failed, on any cell."""
        return [(c.cell, a) for c in self.cells for a in c.checks if not a.passed]

    @property
    def units(self) -> Units | None:
        """The units its checks are drawn over; None in a report that predates segments."""
        if self.mode == "training" and not self.segment_rounds:
            return None
        return Units(self.mode, self.rounds, self.segment_rounds, self.unit_rounds)

    @property
    def check_chance(self) -> float | None:
        units = self.units
        return None if units is None else units.chance

    @property
    def check_power(self) -> float | None:
        units = self.units
        return None if units is None else units.power(units.chance)

    def decided_units(self, cell: CellTiming) -> int:
        """The units whose draw ``cell`` made: all, or those up to a failed check's (the
        test calls the backend no more after it)."""
        units = self.units
        if units is None:
            return 0
        failed = [a for a in cell.checks if not a.passed]
        return units.up_to(failed[0].round) if failed else units.count

    @property
    def shared_cells(self) -> list[CellTiming]:
        """Every cell that other processes shared during the timed rounds."""
        return [c for c in self.cells if c.contention is not None and c.contention.shared]

    @property
    def peak_macs_per_second(self) -> float | None:
        if any(c.peak is None for c in self.cells):
            return None
        return sum(c.peak.macs_per_second for c in self.cells)

    @property
    def macs_per_second(self) -> float:
        return self.macs_per_image * self.images / self.seconds

    def cell_macs_per_second(self, cell: CellTiming) -> float:
        return self.macs_per_image * cell.images / cell.seconds

    @property
    def orp(self) -> float | None:
        """ОРП in percent, or None without a peak for every cell."""
        peak = self.peak_macs_per_second
        if peak is None:
            return None
        return relative_real_performance(self.macs_per_image, self.images, self.seconds, peak)

    def cell_orp(self, cell: CellTiming) -> float | None:
        if cell.peak is None:
            return None
        return relative_real_performance(
            self.macs_per_image, cell.images, cell.seconds, cell.peak.macs_per_second
        )

    @property
    def name(self) -> str:
        """The test, without a word on its compliance (known once the session ends)."""
        return benchmark_name(self.latin, self.mode, self.dtype, self.batch)

    @property
    def designation(self) -> str:
        return designate_test(
            self.latin,
            self.mode,
            self.dtype,
            self.batch,
            self.meets_image_count,
            self.compliant,
            self.table_set,
            self.requested_images,
        )

    def as_dict(self) -> dict:
        return {
            "network": self.latin,
            "letter": CYRILLIC[self.latin],
            "mode": self.mode,
            "dtype": self.dtype,
            "designation": self.designation,
            "compliant": self.compliant,
            "noncompliance_reasons": list(self.reasons),
            "comment": self.comment,
            "table_set": self.table_set,
            "requested_images": self.requested_images,
            "segment_rounds": self.segment_rounds,
            "residual_scale": self.residual_scale,
            "unit_rounds": self.unit_rounds,
            "copy_share": self.copy_share,
            "batch": self.batch,
            "meets_image_count": self.meets_image_count,
            "images": self.images,
            "rounds": self.rounds,
            "seconds": self.seconds,
            "macs_per_image": self.macs_per_image,
            "macs_per_second": self.macs_per_second,
            "peak_macs_per_second": self.peak_macs_per_second,
            "orp_percent": self.orp,
            "cells": [{**c.as_dict(), "orp_percent": self.cell_orp(c)} for c in self.cells],
            "spread": self.spread.as_dict(),
            "checks": self.checks_dict(),
        }

    def checks_dict(self) -> dict | None:
        """The checks' draw and power (standard.md §7.7): ``check`` recomputes each."""
        units = self.units
        if units is None:
            return None
        return {
            "unit": "segment" if units.segments else "round" if units.length == 1 else "rounds",
            "unit_rounds": units.length,
            "units": units.count,
            "chance": self.check_chance,
            "cheat_share": CHEAT_SHARES[self.mode],
            "power": self.check_power,
            "made": sum(len(c.checks) for c in self.cells),
            "seconds": sum(c.check_seconds for c in self.cells),
        }

    @classmethod
    def from_dict(cls, data: dict) -> Timing:
        """The test ``as_dict`` wrote, from what was measured (the network, mode, type,
        batch, rounds, MACs per image, the cells' rounds and peaks, training's data); what
        the judge decides is left to it, and every figure derived is recomputed, not read."""
        return cls(
            latin=data["network"],
            mode=data["mode"],
            dtype=data["dtype"],
            batch=data["batch"],
            rounds=data["rounds"],
            macs_per_image=data["macs_per_image"],
            cells=tuple(CellTiming.from_dict(c) for c in data["cells"]),
            segment_rounds=data.get("segment_rounds"),
            residual_scale=data.get("residual_scale"),
            unit_rounds=data.get("unit_rounds"),
            copy_share=data.get("copy_share"),
        )


def macs_per_image(network: Network, mode: str) -> int:
    return training_macs(network) if mode == "training" else inference_macs(network)
