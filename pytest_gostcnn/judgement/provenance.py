"""Where a network's table came from, and which provenances may give compliant results."""

from __future__ import annotations

from dataclasses import dataclass

# The provenances whose results may be compliant: the reconstructions the suite ships (the
# standard's tables are lost) and official tables a user loads. Anything else (a
# user's table that calls itself a reconstruction, a shipped set of another kind such as
# the widely used networks at full size) is stated, never compliant.
COMPLIANT_PROVENANCES = frozenset({("reconstruction", True), ("official", False)})


@dataclass(frozen=True)
class Provenance:
    """Where one network's table came from: the kind its file states, and whether it is
    one the suite ships (not loaded from ``--gost-tables``)."""

    kind: str
    shipped: bool

    @property
    def compliant(self) -> bool:
        return (self.kind, self.shipped) in COMPLIANT_PROVENANCES

    def describe(self) -> str:
        return f"shipped {self.kind}" if self.shipped else f"{self.kind}, from --gost-tables"

    def as_dict(self) -> dict:
        return {"kind": self.kind, "shipped": self.shipped, "compliant": self.compliant}
