"""`cdk-adapters rebalance` on a real placement file: what it moves, what it writes, what it refuses."""

from __future__ import annotations

import io
from pathlib import Path

from cdk_adapters.cli import main
from cdk_adapters.contract.cell_placement import PlacementRecord, cell_names, hashed_cell, place


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def _recorded(tmp_path: Path, families: int = 300, cells: int = 4) -> tuple[Path, PlacementRecord]:
    placement, _ = place([f"tenant{index:03d}-v1" for index in range(families)], cell_names(cells))
    assert placement is not None
    path = tmp_path / "placement.json"
    path.write_text(placement.record.to_json(), encoding="utf-8")
    return path, placement.record


def test_a_dry_run_lists_the_moves_into_a_new_cell_and_writes_nothing(tmp_path: Path) -> None:
    path, record = _recorded(tmp_path)
    before = path.read_text()
    status, out, err = run("rebalance", "--placement", str(path), "--cells", "5", "--dry-run")
    assert status == 0
    expected = sorted(f"{f}: {cell} -> cell-4" for f, cell in record.families.items() if hashed_cell(f, cell_names(5)) != cell)
    assert sorted(out.splitlines()) == expected and expected
    assert f"would move {len(expected)} of 300 families onto 5 cells" in err
    assert path.read_text() == before


def test_rebalance_rewrites_the_file_with_the_moves_and_nothing_else(tmp_path: Path) -> None:
    path, record = _recorded(tmp_path)
    status, out, _ = run("rebalance", "--placement", str(path), "--cells", "5", "--limit", "2")
    assert status == 0 and len(out.splitlines()) == 2
    moved = PlacementRecord.from_json(path.read_text())
    changed = {f for f in record.families if moved.families[f] != record.families[f]}
    assert changed == {line.split(":")[0] for line in out.splitlines()}
    assert all(moved.families[f] == "cell-4" for f in changed)


def test_shrinking_without_enough_moves_says_which_families_stay_behind(tmp_path: Path) -> None:
    path, record = _recorded(tmp_path, cells=4)
    stranded = sum(1 for cell in record.families.values() if cell == "cell-3")
    status, _, err = run("rebalance", "--placement", str(path), "--cells", "3", "--limit", "1")
    assert status == 0
    assert f"{stranded - 1} families stay in removed cells (raise --limit)" in err


def test_an_unreadable_file_and_bad_counts_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "placement.json"
    bad.write_text('{"version": 9, "families": {}}')
    status, _, err = run("rebalance", "--placement", str(bad), "--cells", "2")
    assert status == 1 and "version 9 is not 1" in err
    status, _, err = run("rebalance", "--placement", str(bad), "--cells", "0")
    assert status == 2 and "--cells: must be at least 1, got 0" in err
    assert bad.read_text() == '{"version": 9, "families": {}}'


def test_a_manifests_pins_keep_or_move_their_families_and_nothing_else_moves_for_them(tmp_path: Path) -> None:
    from tests.cli.test_place import manifest

    path, record = _recorded(tmp_path)
    moving = sorted(f for f, cell in record.families.items() if hashed_cell(f, cell_names(5)) != cell)
    kept, sent = moving[0], moving[1]
    target = next(cell for cell in cell_names(5) if cell not in (record.families[sent], hashed_cell(sent, cell_names(5))))
    rows = manifest(tmp_path, 300, pins={f"{kept}-v1": record.families[kept], f"{sent}-v1": target})
    status, out, _ = run("rebalance", "--placement", str(path), "--cells", "5", "--manifest", str(rows))
    assert status == 0
    moved = PlacementRecord.from_json(path.read_text()).families
    assert moved[kept] == record.families[kept] and f"{kept}:" not in out
    assert moved[sent] == target and f"{sent}: {record.families[sent]} -> {target}" in out
    assert len(out.splitlines()) == len(moving) - 1
