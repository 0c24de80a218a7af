"""`service_from_manifest`: every manifest row in the cell placement chooses, a row's ``cell:``
pinning its family, and a bad ``cell:`` refused naming the adapter and the field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import aws_cdk as cdk
import pytest
import yaml

from cdk_adapters import ComputeRequirements, ContainerImage, FleetPlacement
from cdk_adapters.contract.cell_placement import cell_names, family_of, hashed_cell
from cdk_adapters.manifest import plan_manifest_file
from cdk_adapters.manifest.service_wiring import service_from_manifest
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import DIGEST_IMAGE, REPO_ROOT

EXAMPLE = REPO_ROOT / "manifests" / "example.yaml"


def manifest_with(directory: Path, cells: dict[str, str]) -> Path:
    """The example manifest with `cells` (adapter -> its ``cell:``) written into its rows."""
    manifest = yaml.safe_load(EXAMPLE.read_text())
    for row in manifest["adapters"]:
        if row["name"] in cells:
            row["cell"] = cells[row["name"]]
    path = directory / "manifest.yaml"
    path.write_text(yaml.safe_dump(manifest))
    shutil.copy(EXAMPLE.with_suffix(".lock.json"), path.with_suffix(".lock.json"))
    return path


def props(_stack, _cell):
    return {
        "image": ContainerImage.from_digest_uri(DIGEST_IMAGE),
        "compute": ComputeRequirements(min_memory_required_in_mb=16384),
        "placement": FleetPlacement.in_endpoint_stack(),
    }


def rows() -> list[str]:
    return [row["name"] for row in yaml.safe_load(EXAMPLE.read_text())["adapters"]]


def test_every_row_lands_in_its_hashed_cell_and_a_cell_pin_moves_its_family(tmp_path):
    plain = service_from_manifest(cdk.App(), "Svc", manifest=plan_manifest_file(EXAMPLE), cells=2, props=props)
    for name in rows():
        assert plain.cell_of(name) == hashed_cell(family_of(name), cell_names(2))
        assert name in plain.cell(plain.cell_of(name)).endpoint.adapter_component_names()
    moved = rows()[0]
    elsewhere = next(cell for cell in cell_names(2) if cell != plain.cell_of(moved))
    pinned = service_from_manifest(
        cdk.App(), "Svc", manifest=plan_manifest_file(manifest_with(tmp_path, {moved: elsewhere})), cells=2, props=props
    )
    assert pinned.cell_of(moved) == elsewhere
    assert json.loads(pinned.service_record().to_json())["placement"] == {family_of(moved): elsewhere}


def test_a_pin_to_a_cell_the_service_lacks_fails_naming_the_family(tmp_path):
    name = rows()[0]
    plan = plan_manifest_file(manifest_with(tmp_path, {name: "cell-9"}))
    with pytest.raises(
        ConfigurationError, match=rf"adapter family '{family_of(name)}'.*pins: pins it to 'cell-9', which is not a cell"
    ):
        service_from_manifest(cdk.App(), "Svc", manifest=plan, cells=2, props=props)


def test_a_malformed_cell_is_refused_naming_the_adapter_and_the_field(tmp_path):
    name = rows()[0]
    with pytest.raises(ConfigurationError) as refused:
        plan_manifest_file(manifest_with(tmp_path, {name: "nine"}))
    assert f"adapter '{name}'" in str(refused.value) and "cell" in str(refused.value)


def test_the_example_app_keeps_a_family_where_its_placement_file_records_it(tmp_path):
    import app as example_app
    from cdk_adapters.contract.cell_placement import PlacementRecord
    from tests.constructs.conftest import app_context

    name = rows()[0]
    recorded = next(cell for cell in cell_names(2) if cell != hashed_cell(family_of(name), cell_names(2)))
    placement = tmp_path / "placement.json"
    placement.write_text(PlacementRecord({family_of(name): recorded}).to_json())
    app = cdk.App(context={**app_context("dev"), "cells": "2", "placement": str(placement)})
    service = example_app.build(app)
    assert service.cell_of(name) == recorded
    assert json.loads(service.service_record().to_json())["placement"] == {family_of(name): recorded}
    with pytest.raises(ConfigurationError, match="cells: must be a whole number of cells >= 1"):
        example_app.build(cdk.App(context={**app_context("dev"), "cells": "two"}))


def test_every_alias_across_cells_is_reported_at_once(tmp_path):
    document = yaml.safe_load(EXAMPLE.read_text())
    [first, second] = [row["name"] for row in document["adapters"][:2]]
    assert hashed_cell(family_of(first), cell_names(2)) != hashed_cell(family_of(second), cell_names(2))
    document["aliases"] = {"mix-a": {first: 50, second: 50}, "mix-b": {first: 10, second: 90}}
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(document))
    shutil.copy(EXAMPLE.with_suffix(".lock.json"), path.with_suffix(".lock.json"))
    with pytest.raises(ConfigurationError) as refused:
        service_from_manifest(cdk.App(), "Svc", manifest=plan_manifest_file(path), cells=2, props=props)
    assert "alias 'mix-a'" in str(refused.value) and "alias 'mix-b'" in str(refused.value)


def test_cells_and_an_explicit_placement_file_are_read_strictly(tmp_path):
    import app as example_app
    from tests.constructs.conftest import app_context

    context = app_context("dev")
    context["environments"]["dev"] = {**context["environments"]["dev"], "cells": 0}
    with pytest.raises(
        ConfigurationError, match=r"cdk.json: context.environments.dev.cells: must be a whole number of cells >= 1, got 0"
    ):
        example_app.build(cdk.App(context=context))
    with pytest.raises(ConfigurationError, match=r"missing\.json"):
        example_app.build(cdk.App(context={**app_context("dev"), "cells": "2", "placement": str(tmp_path / "missing.json")}))
