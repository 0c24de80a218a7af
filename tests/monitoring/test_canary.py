"""The canary: its optional entry in the discovery record (contract), `set_canary` on the main
endpoint, and the manifest's canary rows."""

from __future__ import annotations

import json
import random

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from cdk_adapters.contract.discovery import CanaryRecord, DiscoveryRecord, DiscoveryRecordError
from cdk_adapters.problems import ConfigurationError
from tests.monitoring.conftest import endpoint_with
from tests.support.synth_refusal import refused_at_synth

CANARY = CanaryRecord(
    endpoint_name="prod-canary",
    base_inference_component_name="prod-canary-base",
    component_prefix="prod-canary",
    adapters=("support-en-v1",),
    traffic_percent=5,
)
MAIN = DiscoveryRecord(endpoint_name="prod", base_inference_component_name="prod-base", component_prefix="prod")


def test_the_canary_entry_round_trips_and_leaves_the_other_fields_as_they_were():
    with_canary = DiscoveryRecord(**{**MAIN.__dict__, "canary": CANARY})
    document = json.loads(with_canary.to_json())
    assert document["canary"] == {
        "endpoint_name": "prod-canary",
        "base_inference_component_name": "prod-canary-base",
        "component_prefix": "prod-canary",
        "adapters": ["support-en-v1"],
        "traffic_percent": 5,
    }
    assert {key: value for key, value in document.items() if key != "canary"} == json.loads(MAIN.to_json())
    assert DiscoveryRecord.from_json(with_canary.to_json()) == with_canary
    assert "canary" not in MAIN.to_json() and DiscoveryRecord.from_json(MAIN.to_json()).canary is None


def test_a_bad_canary_entry_is_refused_saying_what_is_wrong():
    document = json.loads(MAIN.to_json())
    document["canary"] = {
        "endpoint_name": "",
        "adapters": [],
        "traffic_percent": 80,
        "component_prefix": "c",
        "base_inference_component_name": "c-base",
    }
    with pytest.raises(DiscoveryRecordError) as raised:
        DiscoveryRecord.from_json(json.dumps(document))
    text = str(raised.value)
    assert "canary.endpoint_name must be a non-empty string" in text
    assert "canary.adapters must be a non-empty list of adapter names" in text
    assert "canary.traffic_percent must be an integer from 1 to 50, got 80" in text


def test_the_canary_takes_its_share_of_the_adapters_it_serves_only():
    rng = random.Random(7)
    taken = sum(CANARY.takes("Support-EN-v1", rng) for _ in range(10_000))
    assert 400 < taken < 600  # 5% of 10,000, seeded
    assert not any(CANARY.takes("support-de-v1", rng) for _ in range(1000))
    assert CANARY.component_name("Support-EN-v1") == "prod-canary-support-en-v1"


def test_the_main_record_names_the_canary_endpoint():
    app = cdk.App()
    main = endpoint_with(stack=cdk.Stack(app, "Main"))
    canary = endpoint_with(adapters=("support-en-v1",), stack=cdk.Stack(app, "Main-Canary"))
    main.set_canary(canary, traffic_percent=10)
    record = main.discovery_record()
    assert record.canary == CanaryRecord(canary.endpoint_name, canary.base_component_name, canary.prefix, ("support-en-v1",), 10)
    (parameter,) = Template.from_stack(cdk.Stack.of(main)).find_resources("AWS::SSM::Parameter").values()
    assert DiscoveryRecord.from_json(parameter["Properties"]["Value"]).canary == record.canary


def test_a_canary_serving_an_adapter_the_main_endpoint_does_not_fails_synth():
    app = cdk.App()
    main = endpoint_with(adapters=("support-en-v1",), stack=cdk.Stack(app, "Main"))
    canary = endpoint_with(adapters=("support-en-v1", "invoices-v1"), stack=cdk.Stack(app, "Main-Canary"))
    main.set_canary(canary, traffic_percent=5)
    with refused_at_synth("canary: 'invoices-v1' is served by the canary but not by this endpoint", construct=main.node.path):
        Template.from_stack(cdk.Stack.of(main))


def test_a_bad_traffic_share_or_the_endpoint_itself_is_refused():
    main = endpoint_with()
    with pytest.raises(ConfigurationError) as raised:
        main.set_canary(main, traffic_percent=0)
    assert "canary: must be another endpoint" in str(raised.value)
    assert "traffic_percent: must be an integer from 1 to 50, got 0" in str(raised.value)
