"""`AdapterService`: cells in their own stacks, every adapter in exactly one, one service record
that resolves each adapter to the cell whose template holds its component, pins, caps, aliases
and grants that name exactly the cells involved.

Templates are CDK's own (`Template.from_stack`); the record is read back from the parameter's
synthesized value with the reader clients use (`ServiceRecord.from_json`).
"""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.contract.cell_placement import PlacementRecord, cell_names, hashed_cell, place
from cdk_adapters.contract.service_record import ServiceRecord
from cdk_adapters.problems import ConfigurationError
from cdk_adapters.service import AdapterService
from tests.constructs.conftest import ADAPTER_BUCKET_URL, endpoint_props

FAMILIES = [f"tenant{index:02d}" for index in range(9)]
ADAPTERS = [f"{family}-v{version}" for family in FAMILIES for version in (1, 2)]
COMPONENT = "AWS::SageMaker::InferenceComponent"


def artifact(name: str) -> AdapterArtifact:
    return AdapterArtifact.from_s3_url(f"{ADAPTER_BUCKET_URL}{name}/adapter.tar.gz")


def new_service(cells: int = 3, *, adapters=ADAPTERS, **options) -> tuple[cdk.App, AdapterService]:
    app = cdk.App()
    service = AdapterService(app, "Chat", cells=cells, endpoint_props=lambda stack, _cell: endpoint_props(stack), **options)
    for name in adapters:
        service.add_adapter(name, artifact=artifact(name))
    return app, service


def components_of(stack: cdk.Stack) -> set[str]:
    """Adapter component names in `stack`'s template (the base component left out)."""
    found = Template.from_stack(stack).find_resources(COMPONENT)
    return {
        r["Properties"]["InferenceComponentName"]
        for r in found.values()
        if "BaseInferenceComponentName" in r["Properties"]["Specification"]
    }


def published_record(service: AdapterService) -> ServiceRecord:
    [parameter] = Template.from_stack(service.stack).find_resources("AWS::SSM::Parameter").values()
    assert parameter["Properties"]["Name"] == "/cdk-adapters/Chat/service"
    return ServiceRecord.from_json(parameter["Properties"]["Value"])


@pytest.fixture(scope="module")
def three_cells():
    """One synth of 18 adapters over three cells, shared by the tests that only read it."""
    app, service = new_service()
    service.add_alias("tenant03", {"tenant03-v1": 90, "tenant03-v2": 10})
    return app, service, {cell.name: components_of(cell.stack) for cell in service.cells}


def test_each_cell_is_a_stack_of_its_own_and_every_adapter_is_in_exactly_one(three_cells):
    app, service, held = three_cells
    stacks = {stack.stack_name for stack in app.node.find_all() if isinstance(stack, cdk.Stack)}
    assert stacks == {"Chat-cell-0", "Chat-cell-1", "Chat-cell-2", "Chat-service"}
    placed, _ = place(ADAPTERS, cell_names(3))
    assert placed is not None and len(set(placed.cell_of.values())) == 3
    for cell in service.cells:
        expected = {cell.endpoint.adapter_component_names()[name] for name in placed.adapters_in(cell.name)}
        assert held[cell.name] == expected and expected
    assert sum(len(names) for names in held.values()) == len(ADAPTERS)


def test_an_upgrade_reaches_the_first_wave_first(three_cells):
    _, service, _ = three_cells
    assert [[cell.name for cell in wave] for wave in service.waves] == [["cell-0"], ["cell-1", "cell-2"]]
    assert service.cell("cell-0").stack.dependencies == []
    for later in ("cell-1", "cell-2"):
        assert [stack.stack_name for stack in service.cell(later).stack.dependencies] == ["Chat-cell-0"]
    _, two_first = new_service(adapters=[], first_wave=2)
    assert [stack.stack_name for stack in two_first.cell("cell-2").stack.dependencies] == ["Chat-cell-0", "Chat-cell-1"]


def test_the_service_record_resolves_every_adapter_to_the_cell_whose_template_holds_it(three_cells):
    _, service, held = three_cells
    record = published_record(service)
    assert list(record.cells) == cell_names(3) and record.placement == {}  # nothing deviates from the hash
    for name in ADAPTERS:
        cell = record.cell_of(name)
        assert record.record_of(name).component_name(name) in held[cell]
        assert record.record_of(name).endpoint_name == service.cell(cell).endpoint.endpoint_name
    home = record.cell_of("tenant03-v1")
    assert record.cell_of("tenant03") == home and set(record.cells[home].aliases) == {"tenant03"}


def test_the_service_record_stays_small_whatever_the_adapter_count():
    sizes = [len(published_record(new_service(2, adapters=[f"t{i:03d}-v1" for i in range(n)])[1]).to_json()) for n in (4, 40)]
    assert sizes[0] == sizes[1]


def test_recorded_families_keep_their_cell_and_pins_win(three_cells):
    hashed = hashed_cell("tenant05", cell_names(3))
    recorded = next(cell for cell in cell_names(3) if cell != hashed)
    pinned = next(cell for cell in cell_names(3) if cell not in (hashed, recorded))
    _, service = new_service(placement=PlacementRecord({"tenant05": recorded}), pins={"tenant07": pinned})
    assert service.cell_of("tenant05-v2") == recorded
    assert service.cell_of("tenant07-v1") == pinned
    record = published_record(service)
    assert record.cell_of("tenant05-v1") == recorded and record.cell_of("tenant07-v2") == pinned
    assert service.placement.record.families["tenant05"] == recorded


def test_add_adapter_can_pin_a_new_family_and_refuses_an_unknown_cell_or_a_split_family():
    _, service = new_service(adapters=[])
    service.add_adapter("noisy-v1", artifact=artifact("noisy-v1"), cell="cell-2")
    assert service.cell_of("noisy-v1") == "cell-2"
    assert service.add_adapter("noisy-v2", artifact=artifact("noisy-v2")) is not None
    assert service.cell_of("noisy-v2") == "cell-2"  # the family's cell, not the hash
    with pytest.raises(ConfigurationError, match=r"adapter family 'quiet'.*'cell-7', which is not a cell of this service"):
        service.add_adapter("quiet-v1", artifact=artifact("quiet-v1"), cell="cell-7")
    with pytest.raises(ConfigurationError, match=r"adapter family 'noisy'.*pinned to 'cell-2' already"):
        service.add_adapter("noisy-v3", artifact=artifact("noisy-v3"), cell="cell-0")


def test_a_cell_over_its_cap_fails_synth_naming_the_cell_and_its_count():
    app, service = new_service(2, cell_cap=5)
    counts = {cell: len(names) for cell, names in _by_cell(service).items()}
    over = sorted(cell for cell, count in counts.items() if count > 5)
    assert over  # 18 adapters over two cells of at most 5
    with pytest.raises(Exception) as failed:
        app.synth()
    for cell in over:
        assert f"cell '{cell}' of AdapterService 'Chat': cell_cap: would hold {counts[cell]} adapters, over its cap of 5" in str(
            failed.value
        )


def test_an_alias_across_cells_is_refused_naming_the_cells():
    _, service = new_service()
    first, other = next((a, b) for a in ADAPTERS for b in ADAPTERS if service.cell_of(a) != service.cell_of(b))
    with pytest.raises(ConfigurationError, match="must be adapters added to one cell first"):
        service.add_alias("mixed", {first: 50, other: 50})


def test_grant_invoke_names_exactly_the_cells_and_components_involved(three_cells):
    _, service = new_service()
    stack = cdk.Stack(cdk.App(), "Caller")
    role = iam.Role(stack, "Caller", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    names = ["tenant01-v1", "tenant04-v2"]
    service.grant_invoke(role, adapters=names)
    [policy] = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    granted = json.dumps(policy["Properties"]["PolicyDocument"])
    involved = {service.cell_of(name) for name in names}
    for cell in service.cells:
        assert (f'endpoint/{cell.endpoint.endpoint_name.lower()}"' in granted) == (cell.name in involved)
    for name in ADAPTERS:
        component = service.cell(service.cell_of(name)).endpoint.adapter_component_names()[name]
        assert (f'inference-component/{component}"' in granted) == (name in names)
    with pytest.raises(ConfigurationError, match="'nobody-v1' is no adapter or alias added to this service"):
        service.grant_invoke(role, adapters=["nobody-v1"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cells": 0}, "cells: must be a whole number >= 1, got 0"),
        ({"cells": 2, "cell_cap": 0}, "cell_cap: must be a whole number >= 1"),
        ({"cells": 2, "stack_name_prefix": "9-bad_name"}, "stack_name_prefix: '9-bad_name' must start with a letter"),
        ({"cells": 2, "first_wave": 0}, "first_wave: must be a whole number of cells >= 1"),
        ({"cells": 2, "first_wave": 2}, "first_wave: is 2 of 2 cells; it must leave a later wave"),
    ],
)
def test_bad_options_are_refused_naming_the_field(options, message):
    with pytest.raises(ConfigurationError, match=message):
        AdapterService(cdk.App(), "Chat", endpoint_props=lambda stack, _cell: endpoint_props(stack), **options)


def _by_cell(service: AdapterService) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name in ADAPTERS:
        found.setdefault(service.cell_of(name), []).append(name)
    return found


def test_an_alias_may_not_shadow_an_adapter_nor_be_added_twice_and_a_refused_one_leaves_nothing():
    _, service = new_service()
    home = service.cell_of("tenant01-v1")
    with pytest.raises(
        ConfigurationError,
        match=rf"alias 'Tenant02-v1'.*already the name of an adapter of this service \(in {service.cell_of('tenant02-v1')}\)",
    ):
        service.add_alias("Tenant02-v1", {"tenant01-v1": 100})
    service.add_alias("live", "tenant01-v1")
    assert service.cell_of("LIVE") == home
    with pytest.raises(ConfigurationError, match=r"alias 'LIVE'.*already the name of an alias"):
        service.add_alias("LIVE", {"tenant01-v2": 100})
    with pytest.raises(ConfigurationError):
        service.add_alias("broken", {"tenant01-v1": 150})  # the cell's endpoint refuses the weight
    with pytest.raises(KeyError):
        service.cell_of("broken")


def test_an_adapter_added_to_a_cells_endpoint_directly_fails_synth():
    app, service = new_service(adapters=[])
    elsewhere = next(cell for cell in cell_names(3) if cell != hashed_cell("stray", cell_names(3)))
    service.cell(elsewhere).endpoint.add_adapter("stray-v1", artifact=artifact("stray-v1"))
    with pytest.raises(
        Exception, match=rf"adapter 'stray-v1' of AdapterService 'Chat': cell: was added to {elsewhere}'s endpoint directly"
    ):
        app.synth()


def test_a_cap_lowered_after_the_placement_was_read_is_checked_again():
    app, service = new_service(2)
    assert service.placement.record.families  # computed and remembered
    service.cell_cap = 3
    with pytest.raises(Exception, match="over its cap of 3"):
        app.synth()


def test_hashed_over_keeps_new_families_off_the_added_cell_and_the_record_agrees():
    _, service = new_service(3, hashed_over=2)
    assert {service.cell_of(name) for name in ADAPTERS} <= {"cell-0", "cell-1"}
    record = published_record(service)
    assert all(record.cell_of(name) == service.cell_of(name) for name in ADAPTERS)
    pinned = new_service(3, hashed_over=2, adapters=[])[1]
    pinned.add_adapter("noisy-v1", artifact=artifact("noisy-v1"), cell="cell-2")  # a pin still reaches it
    assert pinned.cell_of("noisy-v1") == "cell-2"
    with pytest.raises(ConfigurationError, match="hashed_over: must be a whole number of cells from 1 to 3, got 4"):
        new_service(3, hashed_over=4)


def test_a_pinned_family_whose_own_name_ends_in_a_version_is_published_where_it_is_pinned():
    _, service = new_service(3, adapters=[])
    hashed = hashed_cell("acme-v2", cell_names(3))
    elsewhere = next(cell for cell in cell_names(3) if cell != hashed)
    service.add_adapter("acme-v2-v1", artifact=artifact("acme-v2-v1"), cell=elsewhere)
    service.add_adapter("acme-v1", artifact=artifact("acme-v1"), cell=hashed)  # family acme: another family
    record = published_record(service)
    assert record.cell_of("acme-v2-v1") == service.cell_of("acme-v2-v1") == elsewhere
    assert record.cell_of("acme-v1") == service.cell_of("acme-v1") == hashed
    assert service.placement.record.families["acme-v2"] == elsewhere
