"""Which cell (endpoint) of a multi-endpoint service serves an adapter: one rule, for synth and clients.

A service of several identical endpoints ("cells") places every adapter *family* (the name without
its ``-v<N>`` suffix, compared as SageMaker compares names) in exactly one cell, so every version of
a family, and an alias over them, live on one endpoint: an alias cut-over never crosses endpoints.

The rule is rendezvous (highest-random-weight) hashing: each family goes to the cell whose
``sha256(cell, family)`` is highest. Adding a cell moves only the families that now weigh highest
on the new cell (about 1/N of them), and nothing else; removing one moves only its own. A committed
placement file (`PlacementRecord`, like the manifest's lock file) pins every recorded family to its
cell, so adding a cell moves **no** family once placement is recorded; new families are hashed, and
`rebalance` moves families deliberately and says which. A family may also be pinned by hand (a
manifest row's ``cell:``), e.g. a noisy or regulated tenant alone in its own cell.

Standard library only: the client resolves adapter -> cell with the same function the construct
places with.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cdk_adapters.contract.adapter_names import VERSION_SUFFIX, adapter_name_key
from cdk_adapters.problems import Problem

PLACEMENT_VERSION = 1
"""The placement file's major version; a reader refuses any other."""


def family_of(adapter_name: str) -> str:
    """The adapter's family: its name key without the ``-v<N>`` suffix (``Support-EN-v4`` -> ``support-en``)."""
    key = adapter_name_key(adapter_name)
    match = VERSION_SUFFIX.match(key)
    return match.group("family") if match else key


def _weight(cell: str, family: str) -> int:
    digest = hashlib.sha256(f"{cell}\0{family}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def hashed_cell(family: str, cells: Sequence[str]) -> str:
    """The cell rendezvous hashing gives `family` among `cells` (their order does not matter)."""
    if not cells:
        raise ValueError("a service has at least one cell")
    return max(cells, key=lambda cell: (_weight(cell, family), cell))


@dataclass(frozen=True)
class PlacementRecord:
    """The committed placement file: family -> cell, for every family placed so far."""

    families: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        """Sorted, one family per line: a diff shows exactly which families moved."""
        return json.dumps({"version": PLACEMENT_VERSION, "families": dict(sorted(self.families.items()))}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str = "placement file") -> PlacementRecord:
        """The record in `text`; `ValueError` naming `source` and what is wrong."""
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{source} is not JSON: {error}") from None
        if not isinstance(document, dict) or document.get("version") != PLACEMENT_VERSION:
            got = document.get("version") if isinstance(document, dict) else None
            raise ValueError(f"{source}: version {got!r} is not {PLACEMENT_VERSION}, the version this cdk-adapters reads")
        families = document.get("families")
        if not isinstance(families, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in families.items()):
            raise ValueError(f"{source}: 'families' must map family names to cell names")
        # A family's own name may end in -v<N> too (adapter acme-v2-v1 is family acme-v2): keys are
        # compared as SageMaker compares names, so they must already be lower case.
        if any(not name or adapter_name_key(name) != name for name in families):
            raise ValueError(f"{source}: 'families' must hold family keys (an adapter name without its -v<N>, lower case)")
        return cls(dict(families))


@dataclass(frozen=True)
class Placement:
    """Where every adapter goes, and the record to commit after synth."""

    cell_of: Mapping[str, str]
    """Adapter name -> its cell."""
    record: PlacementRecord
    """Every placed family -> its cell: the recorded ones unchanged, new ones added."""
    hashed: tuple[str, ...]
    """Families placed by the hash this time (not in the record, not pinned)."""

    def adapters_in(self, cell: str) -> list[str]:
        return [name for name, where in self.cell_of.items() if where == cell]

    def aliases_in(self, cell: str, aliases: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
        """The aliases `cell`'s record holds: those whose targets it serves (`place` refused any
        alias whose targets sit in two cells)."""
        held = {adapter_name_key(name) for name in self.adapters_in(cell)}
        return {
            alias: dict(targets)
            for alias, targets in aliases.items()
            if any(adapter_name_key(target) in held for target in targets)
        }


def place(
    adapters: Iterable[str],
    cells: Sequence[str],
    *,
    record: PlacementRecord | None = None,
    pins: Mapping[str, str] | None = None,
    cell_cap: int | None = None,
    aliases: Mapping[str, Mapping[str, int]] | None = None,
    subject: str = "service",
    hashed_over: int | None = None,
) -> tuple[Placement | None, list[Problem]]:
    """Place `adapters` on `cells`: a pin first, then the record, then the hash.

    :param pins: adapter or family name -> cell, what the user asked for; it wins over the record
        (a deliberate move).
    :param cell_cap: most adapters one cell may hold; a placement over it is refused, naming the
        cell and its count.
    :param aliases: alias -> {adapter: weight}; an alias whose targets would sit in two cells is
        refused (a client calls one endpoint per alias, and a cut-over must not cross endpoints).
    :param hashed_over: new families hash over the first this many cells (`hash_cells`); default all.
    :returns: the placement, or None with every problem at once.
    """
    problems: list[Problem] = []
    known = set(cells)
    if len(known) != len(cells) or not cells:
        problems.append(Problem(subject, "cells", f"must be one or more distinct cell names, got {list(cells)!r}"))
        return None, problems
    if hashed_over is not None and not (hashed_over >= 1 and set(cell_names(hashed_over)) <= known):
        problems.append(
            Problem(subject, "hashed_over", f"must name cells of {subject} (cell-0 .. cell-<n-1>), got {hashed_over!r}")
        )
        return None, problems
    pinned: dict[str, str] = {}
    for name, cell in (pins or {}).items():
        if cell not in known:
            problems.append(
                Problem(
                    f"adapter family {family_of(name)!r}",
                    "cell",
                    f"pins it to {cell!r}, which is not a cell of {subject} ({', '.join(cells)})",
                )
            )
        elif pinned.setdefault(family_of(name), cell) != cell:
            problems.append(
                Problem(f"adapter family {family_of(name)!r}", "cell", "is pinned to two cells; a family lives in one")
            )
    recorded = dict((record or PlacementRecord()).families)
    for family, cell in sorted(recorded.items()):
        if cell not in known and family not in pinned:
            problems.append(
                Problem(
                    f"adapter family {family!r}",
                    "cell",
                    f"is recorded in cell {cell!r}, which {subject} no longer has; move it with `cdk-adapters rebalance` first",
                )
            )
    cell_of: dict[str, str] = {}
    families: dict[str, str] = dict(recorded)
    hashed: list[str] = []
    for name in adapters:
        family = family_of(name)
        chosen = cell_for(family, cells, pinned=pinned, recorded=recorded, hashed_over=hashed_over)
        if family not in pinned and recorded.get(family) not in known and family not in families:
            hashed.append(family)
        families[family] = chosen
        cell_of[name] = chosen
    problems += _cap_problems(cell_of, cells, cell_cap, subject)
    problems += _alias_problems(cell_of, aliases or {}, subject)
    if problems:
        return None, problems
    return Placement(cell_of, PlacementRecord(families), tuple(hashed)), []


def cell_for(
    family: str,
    cells: Sequence[str],
    *,
    pinned: Mapping[str, str] | None = None,
    recorded: Mapping[str, str] | None = None,
    hashed_over: int | None = None,
) -> str:
    """The one rule for a family's cell: its pin, else its recorded cell (while that cell exists),
    else the hash over the first `hashed_over` cells (default: all of them)."""
    chosen = (pinned or {}).get(family) or (recorded or {}).get(family)
    return chosen if chosen is not None and chosen in cells else hashed_cell(family, hash_cells(cells, hashed_over))


def hash_cells(cells: Sequence[str], hashed_over: int | None) -> Sequence[str]:
    """The cells unrecorded families hash over: the first `hashed_over` (all when None). Keeping it
    when a cell is added keeps every family nobody recorded (a tenant stack's) where it is."""
    return cells if hashed_over is None else cell_names(hashed_over)


def _cap_problems(cell_of: Mapping[str, str], cells: Sequence[str], cell_cap: int | None, subject: str) -> list[Problem]:
    """Each cell over `cell_cap`, named with its count."""
    if cell_cap is None:
        return []
    counts = {cell: sum(1 for where in cell_of.values() if where == cell) for cell in cells}
    return [
        Problem(
            f"cell {cell!r} of {subject}",
            "cell_cap",
            f"would hold {count} adapters, over its cap of {cell_cap}; add a cell, then "
            "`cdk-adapters rebalance` to move families into it, or raise the cap",
        )
        for cell, count in counts.items()
        if count > cell_cap
    ]


def _alias_problems(cell_of: Mapping[str, str], aliases: Mapping[str, Mapping[str, int]], subject: str) -> list[Problem]:
    """Each alias whose targets sit in two cells (a client calls one endpoint per alias)."""
    cell_by_key = {adapter_name_key(name): cell for name, cell in cell_of.items()}
    problems = []
    for alias in aliases:
        if adapter_name_key(alias) in cell_by_key:
            message = (
                f"is also the name of an adapter (in {cell_by_key[adapter_name_key(alias)]}); a client resolves the alias first"
            )
            problems.append(Problem(f"alias {alias!r} of {subject}", "name", message))
    for alias, targets in aliases.items():
        homes = sorted({cell_by_key[key] for key in map(adapter_name_key, targets) if key in cell_by_key})
        if len(homes) > 1:
            spanned = ", ".join(sorted({family_of(target) for target in targets}))
            message = f"would span cells {', '.join(homes)} (families {spanned}); pin those families to one cell"
            problems.append(Problem(f"alias {alias!r} of {subject}", "targets", message))
    return problems


@dataclass(frozen=True)
class Move:
    family: str
    from_cell: str
    to_cell: str

    def __str__(self) -> str:
        return f"{self.family}: {self.from_cell} -> {self.to_cell}"


def rebalance(
    record: PlacementRecord, cells: Sequence[str], *, limit: int | None = None, pins: Mapping[str, str] | None = None
) -> tuple[PlacementRecord, list[Move]]:
    """Move recorded families to the cell the hash gives them now (at most `limit` moves, families in
    a removed cell first, then by name); the new record and the moves, to review and commit.
    A pinned family (`pins`: adapter or family name -> cell) goes to its pin instead."""
    pinned = {family_of(name): cell for name, cell in (pins or {}).items()}
    hashed = {family: pinned.get(family) or hashed_cell(family, cells) for family in record.families}
    moves = [Move(family, cell, hashed[family]) for family, cell in record.families.items() if hashed[family] != cell]
    moves.sort(key=lambda move: (move.from_cell in cells, move.family))
    chosen = moves if limit is None else moves[:limit]
    families = dict(record.families)
    for move in chosen:
        families[move.family] = move.to_cell
    return PlacementRecord(families), chosen


CELL_NAME_PATTERN = r"^cell-(0|[1-9][0-9]*)$"
"""What `cell_names` gives: a pin (a manifest row's ``cell:``) must name a cell this way."""


def cell_names(count: int) -> list[str]:
    """``cell-0`` .. ``cell-<count-1>``: a cell's name is its hash identity, so it never changes."""
    return [f"cell-{index}" for index in range(count)]
