"""``Options``: what the ``--gost-*`` options (``option_definitions.py``) say, parsed into
one frozen object, with the rerun command that repeats them; and the networks
``--gost-networks`` selects. Nothing here imports pytest.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_gostcnn.machine.peak import Peak
from pytest_gostcnn.model.network import CYRILLIC, LATIN, Network, network_key
from pytest_gostcnn.reference.library import NUMPY, ReferenceLibrary

from .option_definitions import BY_NAME, OPTIONS, RERUN_ORDER


@dataclass(frozen=True)
class Options:
    """What the ``--gost-*`` options say, each parsed and checked on its own.

    What depends on more than one option or on the machine (a data type the backend
    declares, a network the tables hold, the MPI local rank) is checked when the session
    starts (``run/resolution.py``). ``given`` names the options given on the command line or
    in the ini file.
    """

    backend: str
    dtype: str
    batch: int
    mode: str
    networks: str | None
    seed: int
    tables: str | None
    weights: str
    rmse_threshold: float | None
    profile: str
    images: int | None
    peak: Peak | None
    report: str | None
    local_cell: int | None
    resume: str | None = None
    compare: str | None = None
    compare_fail: float | None = None
    versus: str | None = None
    stall_timeout: float | None = None
    reference: ReferenceLibrary = NUMPY
    reference_memory: int | None = None
    allow_unavailable: bool = False
    backend_option: tuple[tuple[str, str], ...] = ()  # KEY=VALUE pairs, in the order given
    given: frozenset[str] = frozenset()

    @classmethod
    def parse(
        cls, texts: Mapping[str, str | list[str] | None], flags: Mapping[str, str] | None = None
    ) -> Options:
        """The options from their texts by name (None: not given); ValueError naming one
        by its flag, or by ``flags[name]`` (the ini setting a text came from)."""
        flags = flags or {}
        values = {
            option.name: option.value(texts.get(option.name), flags.get(option.name))
            for option in OPTIONS
        }
        given = frozenset(name for name in BY_NAME if texts.get(name) is not None)
        return cls(**values, given=given)

    @property
    def backend_options(self) -> dict[str, str]:
        """``--gost-backend-option`` as a mapping, key to value."""
        return dict(self.backend_option)

    @property
    def modes(self) -> tuple[str, ...]:
        return ("training", "inference") if self.mode == "both" else (self.mode,)

    def args(self, **changes: Any) -> list[str]:
        """The ``--gost-*`` arguments that reproduce these options, with ``changes``."""
        options = dataclasses.replace(self, **changes)
        args = []
        for option in sorted(OPTIONS, key=lambda o: RERUN_ORDER.index(o.name)):
            value = getattr(options, option.name)
            if option.rerun == "never" or value is None or value == "":
                continue
            if option.rerun == "changed" and option.default is not None:
                if value == option.value(None):
                    continue
            if option.repeat:
                args.extend(f"{option.flag}={key}={text}" for key, text in value)
                continue
            args.append(f"{option.flag}={value}")
        return args

    def rerun(self, keyword: str, **changes: Any) -> str:
        return shlex.join(["pytest", *self.args(**changes), "-k", keyword])


def select_networks(
    networks: dict[str, Network],
    spec: str | None,
    option: str = "--gost-networks",
    tables_option: str = "--gost-tables",
) -> dict[str, Network]:
    """The networks ``spec`` names (letters, Latin or Cyrillic, or a name's start), in the
    standard's order; all of them when ``spec`` is None."""
    if spec is None:
        return networks
    chosen: dict[str, Network] = {}
    given: dict[str, str] = {}  # the name each chosen network was given by
    for token in (t.strip() for t in spec.split(",")):
        if not token:
            raise ValueError(f"{option}={spec}: an empty name between commas")
        try:
            latin = network_key(token)
        except KeyError:
            by_name = [n for n in networks.values() if n.name.lower().startswith(token.lower())]
            if len(by_name) != 1:
                known = ", ".join(f"{n.latin} ({n.letter}, {n.name})" for n in networks.values())
                raise ValueError(f"{option}: unknown network {token!r}; known: {known}") from None
            latin = by_name[0].latin
        if latin not in networks:
            raise ValueError(
                f"{option}: network {latin} ({CYRILLIC[latin]}) has no table in {tables_option}"
            )
        if latin in chosen:
            raise ValueError(
                f"{option}={spec}: names {latin} ({CYRILLIC[latin]}) twice ({given[latin]!r} "
                f"and {token!r}); name each network once"
            )
        chosen[latin], given[latin] = networks[latin], token
    if not chosen:
        raise ValueError(f"{option}={spec}: no network named")
    return {latin: chosen[latin] for latin in LATIN.values() if latin in chosen}
