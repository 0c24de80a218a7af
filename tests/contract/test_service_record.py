"""The multi-cell service record resolves every adapter to the cell placement put it in."""

from __future__ import annotations

import pytest

from cdk_adapters.contract.cell_placement import PlacementRecord, cell_names, family_of, hashed_cell, place
from cdk_adapters.contract.discovery import DiscoveryRecord, DiscoveryRecordError
from cdk_adapters.contract.service_record import ServiceRecord


def _cells(count: int, aliases: dict[str, dict[str, dict[str, int]]] | None = None) -> dict[str, DiscoveryRecord]:
    return {
        name: DiscoveryRecord(
            endpoint_name=f"svc-{name}",
            base_inference_component_name=f"svc-{name}-base",
            component_prefix=f"svc-{name}",
            aliases=(aliases or {}).get(name, {}),
        )
        for name in cell_names(count)
    }


def _adapters(families: int, versions: int = 2) -> list[str]:
    return [f"tenant{index:05d}-v{version}" for index in range(families) for version in range(1, versions + 1)]


def test_every_adapter_resolves_to_its_placed_cell_and_the_record_does_not_grow_with_them() -> None:
    sizes = []
    for families in (300, 3_000):
        adapters = _adapters(families)
        placement, _ = place(adapters, cell_names(10))
        assert placement is not None
        service = ServiceRecord.from_placement(_cells(10), placement.record)
        assert service.placement == {}
        assert all(service.cell_of(name) == placement.cell_of[name] for name in adapters)
        assert service.record_of(adapters[0]).endpoint_name == f"svc-{placement.cell_of[adapters[0]]}"
        sizes.append(len(service.to_json()))
    assert sizes[0] == sizes[1]


def test_after_a_cell_is_added_the_record_lists_exactly_the_families_the_file_keeps_off_the_hash() -> None:
    adapters = _adapters(2_000)
    ten, _ = place(adapters, cell_names(10))
    assert ten is not None
    eleven, _ = place(adapters, cell_names(11), record=ten.record)
    assert eleven is not None
    service = ServiceRecord.from_placement(_cells(11), eleven.record)
    kept = {family_of(name) for name in adapters if hashed_cell(family_of(name), cell_names(11)) != ten.cell_of[name]}
    assert set(service.placement) == kept and 0.07 < len(kept) / 2_000 < 0.115
    assert all(service.cell_of(name) == eleven.cell_of[name] for name in adapters)


def test_a_pin_and_an_alias_resolve_to_their_cell() -> None:
    adapters = _adapters(50)
    pins = {"tenant00007-v1": "cell-2"}
    placement, _ = place(adapters, cell_names(3), pins=pins)
    assert placement is not None
    target = "tenant00011-v2"
    home = placement.cell_of[target]
    cells = _cells(3, aliases={home: {"Billing-Stable": {target: 100}}})
    service = ServiceRecord.from_placement(cells, placement.record, pins)
    assert service.placement["tenant00007"] == "cell-2"
    assert service.cell_of("tenant00007-v2") == "cell-2"
    assert service.cell_of("billing-stable") == home
    assert service.record_of("billing-stable").resolve("billing-stable") == target


def test_round_trip_and_a_plain_endpoint_record_reads_as_one_cell() -> None:
    placement, _ = place(_adapters(40), cell_names(3), pins={"tenant00001-v1": "cell-0"})
    assert placement is not None
    service = ServiceRecord.from_placement(_cells(3), placement.record, {"tenant00001-v1": "cell-0"})
    again = ServiceRecord.from_json(service.to_json())
    assert again == service and again.to_json() == service.to_json()
    plain = _cells(1)["cell-0"]
    one = ServiceRecord.from_json(plain.to_json())
    assert list(one.cells) == ["cell-0"] and one.record_of("anything-v1") == plain


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"kind": "cdk-adapters/service", "version": 2}', "service record version 2 is not 1"),
        ('{"kind": "cdk-adapters/service", "version": 1, "rule": "jump"}', "placement rule 'jump' is not"),
        ('{"kind": "cdk-adapters/service", "version": 1, "rule": "rendezvous-sha256-family", "cells": {}}', "one or more cell"),
        (
            '{"kind": "cdk-adapters/service", "version": 1, "rule": "rendezvous-sha256-family", '
            '"cells": {"cell-0": {"kind": "cdk-adapters/discovery", "version": 1}}}',
            "cells.cell-0: 'endpoint_name' must be a non-empty string",
        ),
    ],
)
def test_a_record_it_cannot_read_is_refused_saying_why(text: str, message: str) -> None:
    with pytest.raises(DiscoveryRecordError, match=message):
        ServiceRecord.from_json(text)


def test_placement_naming_an_unknown_cell_is_refused() -> None:
    document = ServiceRecord(_cells(2), {"alpha": "cell-0"}).to_json().replace('"alpha":"cell-0"', '"alpha":"cell-7"')
    with pytest.raises(DiscoveryRecordError, match="'placement' must map families to cells of this record"):
        ServiceRecord.from_json(document)


def test_a_record_publishing_one_alias_from_two_cells_is_refused():
    import json as _json

    cells = {
        cell: DiscoveryRecord(f"chat-{cell}", f"chat-{cell}-base", f"chat-{cell}", aliases={alias: {"x-v1": 100}})
        for cell, alias in (("cell-0", "live"), ("cell-1", "LIVE"))
    }
    text = _json.dumps({**_json.loads(ServiceRecord(cells).to_json())})
    with pytest.raises(DiscoveryRecordError, match="alias 'live' is published by cells cell-0, cell-1"):
        ServiceRecord.from_json(text)


def test_keeping_hashed_over_when_a_cell_is_added_moves_no_unrecorded_family():
    """A tenant stack's families are in nobody's placement file: only the hash places them."""
    tenants = [f"tenant{index:04d}-v1" for index in range(1000)]
    ten = ServiceRecord.from_placement(_cells(10), PlacementRecord())
    eleven = ServiceRecord.from_placement(_cells(11), PlacementRecord(), hashed_over=10)
    assert [ten.cell_of(name) for name in tenants] == [eleven.cell_of(name) for name in tenants]
    assert eleven.placement == {}
    moved = ServiceRecord.from_placement(_cells(11), PlacementRecord())
    assert 60 <= sum(ten.cell_of(n) != moved.cell_of(n) for n in tenants) <= 125  # about 1/11 without it
    assert ServiceRecord.from_json(eleven.to_json()) == eleven
    with pytest.raises(DiscoveryRecordError, match="'hashed_over' must count cells of this record"):
        ServiceRecord.from_json(eleven.to_json().replace('"hashed_over":10', '"hashed_over":12'))
