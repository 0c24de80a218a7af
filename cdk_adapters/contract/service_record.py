"""The discovery record of a multi-cell service: each cell's endpoint record, the placement rule,
and only the families the rule alone would place elsewhere.

A client resolves adapter -> cell -> component with it. The cell comes from an alias the cell's
record holds, else from `cell_placement.hashed_cell` on the adapter's family, unless
``placement`` names the family. ``placement`` lists the hand pins and the recorded families
whose cell differs from the hash (after cells were added and before a rebalance), so the record's
size does not grow with the adapter count while the placement file and the hash agree.

A single endpoint publishes a plain `DiscoveryRecord`, which this reader takes for the service of
one cell it is. An `AdapterService` publishes this record (of one cell or more), which a client
that knows only one endpoint refuses by its kind rather than misreads.

Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cdk_adapters.contract.adapter_names import adapter_name_key
from cdk_adapters.contract.cell_placement import PlacementRecord, cell_names, family_of, hash_cells, hashed_cell
from cdk_adapters.contract.discovery import DiscoveryRecord, DiscoveryRecordError

SERVICE_KIND = "cdk-adapters/service"
SERVICE_VERSION = 1
PLACEMENT_RULE = "rendezvous-sha256-family"
"""The rule `cell_placement.hashed_cell` implements; a reader refuses a rule it does not know."""


def placement_deviations(
    cells: Sequence[str], record: PlacementRecord, pins: Mapping[str, str] | None = None, hashed_over: int | None = None
) -> dict[str, str]:
    """A service record's ``placement`` map: the pinned families (`pins` as given, adapter or family
    name -> cell) and the recorded families the hash alone would place elsewhere, sorted."""
    names = hash_cells(list(cells), hashed_over)
    deviations = {family: cell for family, cell in record.families.items() if hashed_cell(family, names) != cell}
    deviations.update({family_of(name): cell for name, cell in (pins or {}).items()})
    return dict(sorted(deviations.items()))


@dataclass(frozen=True)
class ServiceRecord:
    """Cell name -> its endpoint's record, and the families placed other than by the hash."""

    cells: Mapping[str, DiscoveryRecord]
    placement: Mapping[str, str] = field(default_factory=dict)
    """Family -> cell, for pinned families and those the hash would place elsewhere."""
    hashed_over: int | None = None
    """Families placed by no pin and no record hash over the first this many cells (None: all).
    Kept when a cell is added, it keeps every family nobody recorded (a tenant stack's) where it was."""
    parameters: Mapping[str, str] = field(default_factory=dict)
    """Cell -> the SSM parameter of its own endpoint record (serving reference included), which a
    tenant stack importing the service reads to add an adapter to that cell. Optional."""
    _families: dict[str, str] = field(default_factory=dict, init=False, compare=False, repr=False)
    """Family -> cell, remembered as calls resolve them."""
    _aliases: dict[str, str] = field(default_factory=dict, init=False, compare=False, repr=False)
    """Alias key -> the cell whose record holds it: an alias may be named like no family of its targets."""
    _names: list[str] = field(default_factory=list, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._aliases.update({adapter_name_key(alias): cell for cell, record in self.cells.items() for alias in record.aliases})
        self._names.extend(hash_cells(list(self.cells), self.hashed_over))

    @classmethod
    def one_cell(cls, record: DiscoveryRecord) -> ServiceRecord:
        """An endpoint's record as the service of one cell, ``cell-0``, that it is."""
        return cls({cell_names(1)[0]: record})

    @classmethod
    def from_placement(
        cls,
        cells: Mapping[str, DiscoveryRecord],
        record: PlacementRecord,
        pins: Mapping[str, str] | None = None,
        parameters: Mapping[str, str] | None = None,
        hashed_over: int | None = None,
    ) -> ServiceRecord:
        """The record for `cells`, keeping of the placement file only what the hash does not say."""
        deviations = placement_deviations(list(cells), record, pins, hashed_over)
        return cls(dict(cells), deviations, hashed_over, dict(parameters or {}))

    def cell_of(self, name: str) -> str:
        """The cell that serves `name` (an adapter or an alias); remembered per family."""
        key = adapter_name_key(name)
        found = self._aliases.get(key)
        if found is None:
            family = family_of(key)
            found = self._families.get(family)
            if found is None:
                found = self.placement.get(family) or hashed_cell(family, self._names)
                self._families[family] = found
        return found

    def record_of(self, name: str) -> DiscoveryRecord:
        """The endpoint record of the cell that serves `name`."""
        return self.cells[self.cell_of(name)]

    def to_json(self) -> str:
        document = {
            "kind": SERVICE_KIND,
            "version": SERVICE_VERSION,
            "rule": PLACEMENT_RULE,
            "cells": {cell: json.loads(record.to_json()) for cell, record in self.cells.items()},
            "placement": dict(self.placement),
            **({"parameters": dict(self.parameters)} if self.parameters else {}),
            **({"hashed_over": self.hashed_over} if self.hashed_over is not None else {}),
        }
        return json.dumps(document, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ServiceRecord:
        """A service record; a plain endpoint record reads as a one-cell service. `DiscoveryRecordError`
        says what is wrong."""
        try:
            document = json.loads(text)
        except (TypeError, ValueError) as error:
            raise DiscoveryRecordError(f"not JSON: {error}") from None
        if isinstance(document, dict) and document.get("kind") != SERVICE_KIND:
            return cls.one_cell(DiscoveryRecord.from_json(text))
        if not isinstance(document, dict) or document.get("version") != SERVICE_VERSION:
            got = document.get("version") if isinstance(document, dict) else None
            raise DiscoveryRecordError(
                f"service record version {got!r} is not {SERVICE_VERSION}, the version this cdk-adapters reads"
            )
        if document.get("rule") != PLACEMENT_RULE:
            raise DiscoveryRecordError(
                f"placement rule {document.get('rule')!r} is not {PLACEMENT_RULE!r}, the rule this cdk-adapters knows"
            )
        cells = document.get("cells")
        placement = document.get("placement", {})
        if not isinstance(cells, dict) or not cells:
            raise DiscoveryRecordError("'cells' must map one or more cell names to endpoint records")
        parsed = {}
        for cell, record in cells.items():
            try:
                parsed[cell] = DiscoveryRecord.from_json(json.dumps(record))
            except DiscoveryRecordError as error:
                raise DiscoveryRecordError(f"cells.{cell}: {error}") from None
        if not isinstance(placement, dict) or not all(isinstance(c, str) and c in parsed for c in placement.values()):
            raise DiscoveryRecordError("'placement' must map families to cells of this record")
        held: dict[str, list[str]] = {}
        for cell, record in parsed.items():
            for alias in record.aliases:
                held.setdefault(adapter_name_key(alias), []).append(cell)
        twice = {alias: cells for alias, cells in held.items() if len(cells) > 1}
        if twice:
            alias, cells = sorted(twice.items())[0]
            raise DiscoveryRecordError(f"alias {alias!r} is published by cells {', '.join(cells)}; an alias lives in one cell")
        parameters = document.get("parameters", {})
        if not isinstance(parameters, dict) or not all(c in parsed and isinstance(p, str) for c, p in parameters.items()):
            raise DiscoveryRecordError("'parameters' must map cells of this record to SSM parameter names")
        hashed_over = document.get("hashed_over")
        if hashed_over is not None and (
            isinstance(hashed_over, bool)
            or not isinstance(hashed_over, int)
            or not set(cell_names(max(hashed_over, 1))) <= set(parsed)
            or hashed_over < 1
        ):
            raise DiscoveryRecordError(f"'hashed_over' must count cells of this record (cell-0 ...), got {hashed_over!r}")
        return cls(parsed, placement, hashed_over, parameters)
