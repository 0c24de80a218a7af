"""`cdk-adapters place` on real manifests and files: it records each row's family, keeps recorded
families where they are when a cell is added, honours a row's ``cell:``, refuses without writing,
and ``--check`` fails on a file that is out of date."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import yaml

from cdk_adapters.cli import main
from cdk_adapters.contract.cell_placement import PlacementRecord, cell_names, family_of, hashed_cell
from tests.constructs.conftest import REPO_ROOT

EXAMPLE = REPO_ROOT / "manifests" / "example.yaml"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def manifest(tmp_path: Path, families: int, *, pins: dict[str, str] | None = None) -> Path:
    """The example manifest with `families` rows of one version each (s3 rows: nothing is gated here)."""
    document = yaml.safe_load(EXAMPLE.read_text())
    template = document["adapters"][0]
    document["adapters"] = [
        {"name": f"tenant{index:03d}-v1", "source": template["source"].replace("support-en-v1", f"tenant{index:03d}-v1")}
        for index in range(families)
    ]
    for row in document["adapters"]:
        if pins and row["name"] in pins:
            row["cell"] = pins[row["name"]]
    document["aliases"] = {}
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(document))
    shutil.copy(EXAMPLE.with_suffix(".lock.json"), path.with_suffix(".lock.json"))
    return path


def test_place_records_every_family_and_a_new_cell_moves_none(tmp_path):
    rows, placement = manifest(tmp_path, 200), tmp_path / "placement.json"
    status, out, err = run("place", "--manifest", str(rows), "--cells", "4", "--placement", str(placement))
    assert status == 0 and "recorded 200 new family(ies)" in err and len(out.splitlines()) == 200
    four = PlacementRecord.from_json(placement.read_text())
    assert four.families == {f"tenant{i:03d}": hashed_cell(f"tenant{i:03d}", cell_names(4)) for i in range(200)}
    status, out, _ = run("place", "--manifest", str(rows), "--cells", "5", "--placement", str(placement))
    assert status == 0 and out == "" and PlacementRecord.from_json(placement.read_text()) == four
    assert run("place", "--manifest", str(rows), "--cells", "5", "--placement", str(placement), "--check")[0] == 0


def test_a_row_pin_wins_and_check_fails_on_a_stale_file(tmp_path):
    hashed = hashed_cell("tenant003", cell_names(3))
    elsewhere = next(cell for cell in cell_names(3) if cell != hashed)
    rows, placement = manifest(tmp_path, 10, pins={"tenant003-v1": elsewhere}), tmp_path / "placement.json"
    status, _, err = run("place", "--manifest", str(rows), "--cells", "3", "--placement", str(placement), "--check")
    assert status == 1 and "10 family(ies) not recorded yet" in err and not placement.exists()
    assert run("place", "--manifest", str(rows), "--cells", "3", "--placement", str(placement))[0] == 0
    assert PlacementRecord.from_json(placement.read_text()).families[family_of("tenant003-v1")] == elsewhere


def test_problems_are_listed_and_nothing_is_written(tmp_path):
    rows, placement = manifest(tmp_path, 30, pins={"tenant001-v1": "cell-9"}), tmp_path / "placement.json"
    status, _, err = run("place", "--manifest", str(rows), "--cells", "2", "--placement", str(placement), "--cell-cap", "10")
    assert status == 1 and not placement.exists()
    assert "pins it to 'cell-9', which is not a cell of the service of 2 cell(s)" in err
    assert "cell_cap: would hold" in err  # 30 rows over two cells of at most 10
    assert run("place", "--manifest", str(rows), "--cells", "0", "--placement", str(placement))[0] == 2


def test_a_pin_that_moves_a_recorded_family_is_reported_as_a_move_and_hashed_over_is_a_usage_error(tmp_path):
    rows, placement = manifest(tmp_path, 5), tmp_path / "placement.json"
    assert run("place", "--manifest", str(rows), "--cells", "3", "--placement", str(placement))[0] == 0
    recorded = PlacementRecord.from_json(placement.read_text()).families["tenant002"]
    target = next(cell for cell in cell_names(3) if cell != recorded)
    pinned = manifest(tmp_path, 5, pins={"tenant002-v1": target})
    status, _, err = run("place", "--manifest", str(pinned), "--cells", "3", "--placement", str(placement), "--check")
    assert status == 1 and "0 family(ies) not recorded yet, 1 moved by a pin" in err
    status, out, err = run("place", "--manifest", str(pinned), "--cells", "3", "--placement", str(placement))
    assert status == 0 and out == f"tenant002: {recorded} -> {target} (pinned)\n" and "0 new family(ies) and 1 moved" in err
    assert run("place", "--manifest", str(pinned), "--cells", "3", "--placement", str(placement), "--hashed-over", "4")[0] == 2
