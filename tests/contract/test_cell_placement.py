"""Stable placement of adapter families on the cells of a service (`contract.cell_placement`)."""

from __future__ import annotations

import random

import pytest

from cdk_adapters.contract.cell_placement import (
    PlacementRecord,
    cell_names,
    family_of,
    hashed_cell,
    place,
    rebalance,
)

FAMILIES = [f"tenant{index:05d}-support" for index in range(5_000)]


def _adapters(families: list[str], versions: int = 1) -> list[str]:
    return [f"{family}-v{version}" for family in families for version in range(1, versions + 1)]


def test_family_is_the_name_key_without_its_version() -> None:
    assert family_of("Support-EN-v4") == "support-en"
    assert family_of("support-en-v12") == "support-en"
    assert family_of("billing") == "billing"
    assert family_of("v2-v3") == "v2"


def test_every_version_of_a_family_lands_in_one_cell() -> None:
    placement, problems = place(_adapters(FAMILIES[:500], versions=3), cell_names(10))
    assert not problems and placement is not None
    by_family: dict[str, set[str]] = {}
    for name, cell in placement.cell_of.items():
        by_family.setdefault(family_of(name), set()).add(cell)
    assert all(len(cells) == 1 for cells in by_family.values())
    assert len({next(iter(cells)) for cells in by_family.values()}) == 10  # and the families spread over all ten


def test_the_cell_does_not_depend_on_the_order_of_cells_or_adapters() -> None:
    cells = cell_names(7)
    shuffled = cells[:]
    random.Random(3).shuffle(shuffled)
    assert all(hashed_cell(family, cells) == hashed_cell(family, shuffled) for family in FAMILIES[:1000])
    adapters = _adapters(FAMILIES[:300])
    reversed_placement, _ = place(list(reversed(adapters)), cells)
    placement, _ = place(adapters, cells)
    assert placement is not None and reversed_placement is not None
    assert dict(placement.cell_of) == dict(reversed_placement.cell_of)


def test_adding_an_eleventh_cell_moves_about_a_eleventh_without_the_file_and_none_with_it() -> None:
    adapters = _adapters(FAMILIES)
    ten, _ = place(adapters, cell_names(10))
    assert ten is not None
    # Without the placement file: only the families that now weigh highest on the new cell move, into it.
    eleven, _ = place(adapters, cell_names(11))
    assert eleven is not None
    moved = [name for name in adapters if ten.cell_of[name] != eleven.cell_of[name]]
    assert {eleven.cell_of[name] for name in moved} == {"cell-10"}
    assert 0.07 < len(moved) / len(adapters) < 0.115  # 1/11 = 0.091
    # With the file: nothing moves, and only new families are hashed (onto all eleven cells).
    new_families = [f"newcomer{index:04d}" for index in range(1_100)]
    recorded, _ = place(adapters + _adapters(new_families), cell_names(11), record=ten.record)
    assert recorded is not None
    assert all(recorded.cell_of[name] == ten.cell_of[name] for name in adapters)
    assert set(recorded.hashed) == set(new_families)
    assert "cell-10" in {recorded.cell_of[name] for name in _adapters(new_families)}
    assert recorded.record.families == {**ten.record.families, **{f: recorded.cell_of[f + "-v1"] for f in new_families}}


def test_a_cell_over_its_cap_is_refused_naming_the_cell_and_the_count() -> None:
    adapters = _adapters(FAMILIES[:100])
    counts = {cell: sum(1 for a in adapters if hashed_cell(family_of(a), cell_names(2)) == cell) for cell in cell_names(2)}
    cap = max(counts.values()) - 1
    placement, problems = place(adapters, cell_names(2), cell_cap=cap, subject="service 'Support'")
    assert placement is None
    assert [str(problem) for problem in problems] == [
        f"cell {cell!r} of service 'Support': cell_cap: would hold {count} adapters, over its cap of {cap}; add a cell, "
        "then `cdk-adapters rebalance` to move families into it, or raise the cap"
        for cell, count in counts.items()
        if count > cap
    ]
    assert place(adapters, cell_names(2), cell_cap=cap + 1)[1] == []


def test_a_pin_wins_over_the_hash_and_the_record() -> None:
    adapters = _adapters(FAMILIES[:50], versions=2)
    first, _ = place(adapters, cell_names(3))
    assert first is not None
    noisy = FAMILIES[7]
    elsewhere = next(cell for cell in cell_names(3) if cell != first.cell_of[noisy + "-v1"])
    pinned, problems = place(adapters, cell_names(3), record=first.record, pins={noisy + "-v2": elsewhere})
    assert not problems and pinned is not None
    assert pinned.cell_of[noisy + "-v1"] == pinned.cell_of[noisy + "-v2"] == elsewhere
    assert pinned.record.families[noisy] == elsewhere
    assert {name: cell for name, cell in pinned.cell_of.items() if family_of(name) != noisy} == {
        name: cell for name, cell in first.cell_of.items() if family_of(name) != noisy
    }


def test_bad_pins_and_a_removed_cell_are_refused_together() -> None:
    record = PlacementRecord({"alpha": "cell-0", "beta": "cell-2"})
    placement, problems = place(
        ["alpha-v1", "beta-v1", "gamma-v1", "gamma-v2"],
        cell_names(2),
        record=record,
        pins={"gamma-v1": "cell-9", "alpha-v1": "cell-0", "Alpha-v2": "cell-1"},
    )
    assert placement is None
    assert [str(problem) for problem in problems] == [
        "adapter family 'gamma': cell: pins it to 'cell-9', which is not a cell of service (cell-0, cell-1)",
        "adapter family 'alpha': cell: is pinned to two cells; a family lives in one",
        "adapter family 'beta': cell: is recorded in cell 'cell-2', which service no longer has; "
        "move it with `cdk-adapters rebalance` first",
    ]


def test_rebalance_moves_exactly_the_families_the_hash_places_elsewhere() -> None:
    adapters = _adapters(FAMILIES[:2_000])
    ten, _ = place(adapters, cell_names(10))
    assert ten is not None
    record, moves = rebalance(ten.record, cell_names(11))
    expected = {f for f, cell in ten.record.families.items() if hashed_cell(f, cell_names(11)) != cell}
    assert {move.family for move in moves} == expected and expected
    assert {move.to_cell for move in moves} == {"cell-10"}
    after, _ = place(adapters, cell_names(11), record=record)
    fresh, _ = place(adapters, cell_names(11))
    assert after is not None and fresh is not None and dict(after.cell_of) == dict(fresh.cell_of)
    # A limit moves that many, families of a removed cell first.
    shrunk = PlacementRecord({**ten.record.families, "zz-last": "cell-10"})
    _, limited = rebalance(shrunk, cell_names(10), limit=3)
    assert len(limited) == 1 and str(limited[0]) == f"zz-last: cell-10 -> {hashed_cell('zz-last', cell_names(10))}"
    _, first_three = rebalance(ten.record, cell_names(11), limit=3)
    assert [move.family for move in first_three] == sorted(expected)[:3]


def test_the_record_round_trips_and_refuses_what_it_cannot_read() -> None:
    record = PlacementRecord({"beta": "cell-1", "alpha": "cell-0"})
    text = record.to_json()
    assert text.index('"alpha"') < text.index('"beta"')
    assert PlacementRecord.from_json(text) == record
    for bad, message in (
        ("{", "placement.json is not JSON"),
        ('{"version": 2, "families": {}}', "version 2 is not 1"),
        ('{"version": 1, "families": ["alpha"]}', "must map family names to cell names"),
        ('{"version": 1, "families": {"Alpha-v1": "cell-0"}}', "must hold family keys"),
    ):
        with pytest.raises(ValueError, match=message):
            PlacementRecord.from_json(bad, "placement.json")


def test_an_alias_over_two_families_in_two_cells_is_refused_and_a_pin_mends_it() -> None:
    cells = cell_names(4)
    first = FAMILIES[0]
    other = next(f for f in FAMILIES if hashed_cell(f, cells) != hashed_cell(first, cells))
    aliases = {"billing-stable": {f"{first}-v2": 90, f"{other}-v1": 10}, "same-family": {f"{first}-v1": 50, f"{first}-v2": 50}}
    adapters = [f"{first}-v1", f"{first}-v2", f"{other}-v1"]
    placement, problems = place(adapters, cells, aliases=aliases)
    assert placement is None
    homes = ", ".join(sorted({hashed_cell(first, cells), hashed_cell(other, cells)}))
    assert [str(problem) for problem in problems] == [
        f"alias 'billing-stable' of service: targets: would span cells {homes} (families {first}, {other}); "
        "pin those families to one cell"
    ]
    pinned, problems = place(adapters, cells, aliases=aliases, pins={f"{other}-v1": hashed_cell(first, cells)})
    assert not problems and pinned is not None and len(set(pinned.cell_of.values())) == 1


def test_a_family_whose_own_name_ends_in_a_version_round_trips_through_the_file():
    placed, problems = place(["acme-v2-v1", "acme-v2-v3"], cell_names(3))
    assert placed is not None and not problems and set(placed.record.families) == {"acme-v2"}
    assert PlacementRecord.from_json(placed.record.to_json()) == placed.record
    with pytest.raises(ValueError, match="lower case"):
        PlacementRecord.from_json('{"version": 1, "families": {"Acme": "cell-0"}}')


def test_an_alias_named_like_an_adapter_is_refused():
    _, problems = place(["support-v1", "support-v2"], cell_names(2), aliases={"Support-v2": {"support-v1": 100}})
    assert [str(p) for p in problems] == [
        f"alias 'Support-v2' of service: name: is also the name of an adapter (in {hashed_cell('support', cell_names(2))}); "
        "a client resolves the alias first"
    ]
