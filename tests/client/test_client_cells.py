"""`AdapterClient` over a service of several cells, against botocore's Stubber: every call goes to
the endpoint and component of the cell its adapter is placed in, aliases stay in their cell, and
the record is read from SSM as a service record.

The Stubber checks each request's ``EndpointName`` and ``InferenceComponentName`` exactly, so a
client that sent an adapter to any other cell fails here.
"""

from __future__ import annotations

import json
import random

import pytest
from botocore.stub import Stubber

from cdk_adapters.client import AdapterClient, BaseModelNotAllowed, RetryPolicy, UnexpectedEndpoint
from cdk_adapters.client.client import Target
from cdk_adapters.contract.cell_placement import cell_names, hashed_cell, place
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.contract.service_record import ServiceRecord
from tests.client.test_client_stubbed import ANSWER, NO_CAPACITY, body_of, ssm_client

FAMILIES = [f"tenant{index:02d}" for index in range(12)]
ADAPTERS = [f"{family}-v{version}" for family in FAMILIES for version in (1, 2)]
ALIASES = {family: {f"{family}-v1": 80, f"{family}-v2": 20} for family in FAMILIES[:4]}


def service(count: int = 3, *, pins: dict[str, str] | None = None, allow_base_model: tuple[str, ...] = ()) -> ServiceRecord:
    placement, problems = place(ADAPTERS, cell_names(count), pins=pins, aliases=ALIASES)
    assert placement is not None, problems
    cells = {
        cell: DiscoveryRecord(
            endpoint_name=f"chat-{cell}",
            base_inference_component_name=f"chat-{cell}-base",
            component_prefix=f"chat-{cell}",
            allow_base_model=cell in allow_base_model,
            aliases=placement.aliases_in(cell, ALIASES),
        )
        for cell in cell_names(count)
    }
    return ServiceRecord.from_placement(cells, placement.record, pins)


def expect(runtime, endpoint: str, component: str, prompt: str = "x") -> None:
    runtime.stubber.add_response(
        "invoke_endpoint",
        {"Body": body_of(ANSWER)},
        {
            "EndpointName": endpoint,
            "InferenceComponentName": component,
            "ContentType": "application/json",
            "CustomAttributes": "route=/v1/completions",
            "Body": json.dumps({"prompt": prompt}, separators=(",", ":")).encode(),
        },
    )


def test_every_adapter_is_called_on_its_own_cells_endpoint_and_component(runtime):
    record = service()
    placement, _ = place(ADAPTERS, cell_names(3), aliases=ALIASES)
    assert placement is not None and len(set(placement.cell_of.values())) == 3  # the mix really spans the cells
    for adapter in ADAPTERS:
        cell = placement.cell_of[adapter]
        expect(runtime, f"chat-{cell}", f"chat-{cell}-{adapter}")
    client = AdapterClient.from_record(record, runtime=runtime)
    assert [client.invoke(adapter, "x").adapter for adapter in ADAPTERS] == ADAPTERS


def test_an_alias_and_every_version_it_picks_stay_in_one_cell(runtime):
    client = AdapterClient(service(), runtime=runtime, rng=random.Random(3))
    for alias in ALIASES:
        targets = {client.resolve(alias) for _ in range(60)}
        assert {t.adapter for t in targets} == set(ALIASES[alias])  # both versions drawn
        assert len({t.endpoint_name for t in targets}) == 1
        assert targets == {client.resolve(f"{alias}-v1"), client.resolve(f"{alias}-v2")}


def test_a_pinned_family_is_called_where_it_is_pinned_not_where_the_hash_puts_it(runtime):
    hashed = service().cell_of("tenant05-v1")
    elsewhere = next(cell for cell in cell_names(3) if cell != hashed)
    pinned = service(pins={"tenant05": elsewhere})
    assert pinned.placement == {"tenant05": elsewhere}
    expect(runtime, f"chat-{elsewhere}", f"chat-{elsewhere}-tenant05-v2")
    assert AdapterClient(pinned, runtime=runtime).invoke("tenant05-v2", "x").target.endpoint_name == f"chat-{elsewhere}"


def test_a_retry_waits_for_the_component_on_the_same_cell(runtime, clock):
    record = service()
    cell = record.cell_of("tenant07-v1")
    call = {
        "EndpointName": f"chat-{cell}",
        "InferenceComponentName": f"chat-{cell}-tenant07-v1",
        "ContentType": "application/json",
        "CustomAttributes": "route=/v1/completions",
        "Body": b'{"prompt":"x"}',
    }
    runtime.stubber.add_client_error(
        "invoke_endpoint",
        service_error_code="ValidationError",
        service_message=NO_CAPACITY,
        http_status_code=400,
        expected_params=call,
    )
    runtime.stubber.add_response("invoke_endpoint", {"Body": body_of(ANSWER)}, call)
    client = AdapterClient(record, runtime=runtime, clock=clock, sleep=clock.sleep, retry=RetryPolicy(deadline_s=60))
    assert client.invoke("tenant07-v1", "x").text == " thirty days"


def test_the_base_model_is_called_only_on_a_cell_that_allows_it(runtime):
    with pytest.raises(BaseModelNotAllowed, match="no cell of this service serves the base model"):
        AdapterClient(service(), runtime=runtime).resolve(None, base_model=True)
    client = AdapterClient(service(allow_base_model=("cell-1",)), runtime=runtime, rng=random.Random(1))
    assert {client.resolve(None, base_model=True) for _ in range(20)} == {Target(None, "chat-cell-1-base", "chat-cell-1")}


def test_accepted_endpoints_cover_every_cell(runtime):
    AdapterClient(service(), runtime=runtime, accept_endpoints="chat-cell-*")
    with pytest.raises(UnexpectedEndpoint, match="chat-cell-2"):
        AdapterClient(service(), runtime=runtime, accept_endpoints=["chat-cell-0", "chat-cell-1"])


def test_from_parameter_reads_a_service_record_and_one_cell_keeps_its_record(runtime):
    record = service()
    ssm = ssm_client()
    with Stubber(ssm) as stubber:
        stubber.add_response("get_parameter", {"Parameter": {"Name": "/s", "Value": record.to_json()}}, {"Name": "/s"})
        client = AdapterClient.from_parameter("/s", ssm=ssm, runtime=runtime)
    assert client.service == record
    with pytest.raises(AttributeError, match="record_of"):
        _ = client.record
    one = service(1)
    assert AdapterClient(one, runtime=runtime).record == one.cells["cell-0"]


def test_an_alias_named_unlike_its_family_is_called_on_the_cell_that_publishes_it(runtime):
    home = service().cell_of("tenant05-v1")
    alias = next(a for a in ("live-chat", "front-door", "helpdesk", "concierge") if hashed_cell(a, cell_names(3)) != home)
    aliases = {**ALIASES, alias: {"tenant05-v2": 100}}
    placement, problems = place(ADAPTERS, cell_names(3), aliases=aliases)
    assert placement is not None, problems
    cells = {
        cell: DiscoveryRecord(f"chat-{cell}", f"chat-{cell}-base", f"chat-{cell}", aliases=placement.aliases_in(cell, aliases))
        for cell in cell_names(3)
    }
    expect(runtime, f"chat-{home}", f"chat-{home}-tenant05-v2")
    client = AdapterClient(ServiceRecord.from_placement(cells, placement.record), runtime=runtime)
    assert client.invoke(alias, "x").target.endpoint_name == f"chat-{home}"
