"""The wave gate: in the template (each later cell's model waits for it, it watches exactly the first
wave's alarms, nag and cfn-lint clean) and its handlers against botocore's Stubber (a bake starts
only when an upgrade changes the model and never in a rollback; a first-wave alarm stops the wave)."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk.assertions import Template
from botocore.stub import Stubber

from cdk_adapters import Instances, RankTier
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.problems import ConfigurationError
from cdk_adapters.service import AdapterService
from cdk_adapters.service.wave_handler.index import WaveStopped, check, start
from tests.constructs.conftest import endpoint_props
from tests.constructs.test_nag_lint_composition import cfn_lint, nag_violations
from tests.service.test_adapter_service import artifact

STACK_ID = "arn:aws:cloudformation:us-east-1:123456789012:stack/Chat-cell-1/0"


def gated(image: str = "a" * 64, **props) -> tuple[cdk.App, AdapterService]:
    app = cdk.App()
    uri = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/cdk-adapters-vllm@sha256:{image}"
    service = AdapterService(
        app,
        "Chat",
        cells=3,
        endpoint_props=lambda stack, _cell: endpoint_props(stack, image=ContainerImage.from_digest_uri(uri), **props),
        bake_time=cdk.Duration.minutes(30),
    )
    for name in ("tenant01-v1", "tenant02-v1", "tenant03-v1"):
        service.add_adapter(name, artifact=artifact(name), rank=8)
    return app, service


def gate_of(service: AdapterService, cell: str) -> dict:
    [gate] = Template.from_stack(service.cell(cell).stack).find_resources("Custom::CellWaveGate").values()
    return gate


def test_each_later_cell_waits_for_its_gate_which_watches_the_first_waves_alarms(tmp_path):
    app, service = gated()
    assert not Template.from_stack(service.cell("cell-0").stack).find_resources("Custom::CellWaveGate")
    first = service.cell("cell-0").endpoint.prefix
    for cell in ("cell-1", "cell-2"):
        gate = gate_of(service, cell)
        assert gate["Properties"]["WatchedPrefixes"] == [first] and gate["Properties"]["BakeSeconds"] == "1800"
        template = Template.from_stack(service.cell(cell).stack)
        [model] = template.find_resources("AWS::SageMaker::Model").values()
        [gate_id] = template.find_resources("Custom::CellWaveGate")
        assert gate_id in model["DependsOn"]
        [policy] = [p for p in template.find_resources("AWS::IAM::Policy").values() if "ReadFirstWaveAlarms" in json.dumps(p)]
        assert f":alarm:{first}*" in json.dumps(policy)
        assert nag_violations(service.cell(cell).stack) == []
    outdir = Path(app.synth().directory)
    result = cfn_lint(sorted(outdir.glob("*cell1*.template.json")) or sorted(outdir.glob("*Cell1*.template.json")))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_fingerprint_changes_with_the_image_and_only_then():
    _, before = gated("a" * 64)
    _, same = gated("a" * 64)
    _, upgraded = gated("b" * 64)
    fingerprint = [gate_of(s, "cell-1")["Properties"]["Fingerprint"] for s in (before, same, upgraded)]
    assert fingerprint[0] == fingerprint[1] != fingerprint[2]


def test_a_rank_tiers_model_waits_for_the_gate_and_its_engine_is_in_the_fingerprint():
    tiers = {"instances": Instances(instance_type="ml.g6.12xlarge")}
    _, plain = gated()
    _, tiered = gated(rank_tiers=[RankTier(max_lora_rank=64)], **tiers)
    _, more_slots = gated(rank_tiers=[RankTier(max_lora_rank=64, max_loras=8, max_cpu_loras=8)], **tiers)
    template = Template.from_stack(tiered.cell("cell-1").stack)
    [gate_id] = template.find_resources("Custom::CellWaveGate")
    models = template.find_resources("AWS::SageMaker::Model").values()
    assert len(models) == 2 and all(gate_id in model["DependsOn"] for model in models)
    fingerprints = [gate_of(s, "cell-1")["Properties"]["Fingerprint"] for s in (plain, tiered, more_slots)]
    assert len(set(fingerprints)) == 3, "a change of a tier's engine alone is an upgrade the first wave bakes"


def test_a_bake_time_outside_what_cloudformation_waits_is_refused():
    with pytest.raises(ConfigurationError, match="bake_time: must be 1 to 50 minutes"):
        AdapterService(
            cdk.App(), "Chat", cells=2, endpoint_props=lambda s, _c: endpoint_props(s), bake_time=cdk.Duration.hours(2)
        )


def event(kind: str, fingerprint: str, old: str | None = None, **extra) -> dict:
    properties = {"Cell": "cell-1", "WatchedPrefixes": ["chat-c0"], "BakeSeconds": "1800", "Fingerprint": fingerprint}
    found = {"RequestType": kind, "StackId": STACK_ID, "ResourceProperties": properties, **extra}
    if old is not None:
        found["OldResourceProperties"] = {**properties, "Fingerprint": old}
    return found


def client(name: str):
    return boto3.client(name, region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="k")


def stack_status(stubber: Stubber, status: str) -> None:
    stubber.add_response(
        "describe_stacks",
        {"Stacks": [{"StackName": "Chat-cell-1", "CreationTime": "2026-12-01T00:00:00Z", "StackStatus": status}]},
        {"StackName": STACK_ID},
    )


def test_a_bake_starts_only_when_an_upgrade_changes_the_model_and_never_in_a_rollback():
    cloudformation = client("cloudformation")
    with Stubber(cloudformation) as stubber:
        assert start(event("Create", "f1"), cloudformation, now=lambda: 100.0)["Data"]["BakeUntil"] == "0.0"
        stack_status(stubber, "UPDATE_IN_PROGRESS")
        assert start(event("Update", "f2", old="f1"), cloudformation, now=lambda: 100.0)["Data"]["BakeUntil"] == "1900.0"
        stack_status(stubber, "UPDATE_ROLLBACK_IN_PROGRESS")
        assert start(event("Update", "f1", old="f2"), cloudformation, now=lambda: 100.0)["Data"]["BakeUntil"] == "0.0"
        assert start(event("Update", "f1", old="f1"), cloudformation, now=lambda: 100.0)["Data"]["BakeUntil"] == "0.0"
        stubber.assert_no_pending_responses()


def poll(stubber: Stubber, **states: str) -> None:
    stubber.add_response(
        "describe_alarms",
        {"MetricAlarms": [{"AlarmName": name, "StateValue": state} for name, state in states.items()]},
        {"AlarmNamePrefix": "chat-c0", "AlarmTypes": ["MetricAlarm"]},
    )


def test_the_check_completes_after_a_quiet_bake_and_a_first_wave_alarm_stops_the_wave():
    cloudwatch = client("cloudwatch")
    baking = {**event("Update", "f2", old="f1"), "Data": {"BakeUntil": "1900.0"}}
    with Stubber(cloudwatch) as stubber:
        poll(stubber, **{"chat-c0/error-rate": "OK"})
        assert check(baking, cloudwatch, now=lambda: 1000.0) == {"IsComplete": False}
        poll(stubber, **{"chat-c0/error-rate": "OK", "chat-c0x/error-rate": "ALARM"})  # another endpoint's
        assert check(baking, cloudwatch, now=lambda: 1900.0) == {"IsComplete": True}
        poll(stubber, **{"chat-c0-tenant01-v1/latency-p95": "ALARM"})
        with pytest.raises(WaveStopped, match=r"chat-c0-tenant01-v1/latency-p95\): this cell's upgrade stops"):
            check(baking, cloudwatch, now=lambda: 1000.0)
        poll(stubber)
        with pytest.raises(WaveStopped, match="a bake without alarms proves nothing"):
            check(baking, cloudwatch, now=lambda: 1000.0)
        stubber.assert_no_pending_responses()
    assert check({**baking, "Data": {"BakeUntil": "0.0"}}, cloudwatch) == {"IsComplete": True}


def test_a_bake_time_of_part_minutes_is_refused_at_the_prop():
    with pytest.raises(ConfigurationError, match="bake_time: must be whole minutes"):
        AdapterService(
            cdk.App(), "Chat", cells=2, endpoint_props=lambda s, _c: endpoint_props(s), bake_time=cdk.Duration.seconds(90)
        )
