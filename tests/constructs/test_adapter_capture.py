"""Per-adapter capture on the construct and in the manifest: off (nothing rendered) by default,
rendered through the one contract the container decodes, and refused at synth with every field named."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Template

from adapter_server.settings import ServingSettings
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.contract.capture_record import CAPTURE_ENV, CaptureSettings
from cdk_adapters.manifest import load_manifest
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import ADAPTER_BUCKET_URL, build_endpoint, deployed, model_environment, new_stack
from tests.manifest.builders import write_manifest


def published(name: str) -> AdapterArtifact:
    return AdapterArtifact.from_s3_url(f"{ADAPTER_BUCKET_URL}{name}/adapter.tar.gz")


def test_capture_is_off_unless_asked_for():
    stack = new_stack()
    build_endpoint(stack).add_adapter("support-v1", artifact=published("support-v1"))
    environment = model_environment(stack)
    assert CAPTURE_ENV not in environment
    settings, problems = ServingSettings.from_environ(environment)
    assert problems == [] and not settings.capture.enabled


def test_an_endpoint_default_and_an_adapters_own_settings_reach_the_container():
    stack = new_stack()
    endpoint = build_endpoint(stack, adapter_capture=CaptureSettings(sample_rate=0.01, redact=("response",)))
    endpoint.add_adapter("support-v1", artifact=published("support-v1"))
    endpoint.add_adapter("support-v2", artifact=published("support-v2"), capture=CaptureSettings(sample_rate=0.5, max_bytes=4096))
    environment = model_environment(stack)
    assert json.loads(environment[CAPTURE_ENV]) == {
        "default": {"sample_rate": 0.01, "max_bytes": 16384, "redact": ["response"]},
        "adapters": {"support-v2": {"sample_rate": 0.5, "max_bytes": 4096, "redact": []}},
    }
    settings, problems = ServingSettings.from_environ(environment)
    assert problems == []
    assert settings.capture.for_adapter("support-v2") == CaptureSettings(sample_rate=0.5, max_bytes=4096)
    assert settings.capture.for_adapter("support-v1") == CaptureSettings(sample_rate=0.01, redact=("response",))


def test_bad_capture_settings_are_refused_naming_the_adapter_and_field():
    stack = new_stack()
    with pytest.raises(ConfigurationError) as caught:
        build_endpoint(stack, adapter_capture=CaptureSettings(sample_rate=1.5))
    assert [(p.field, p.message) for p in caught.value.problems] == [
        ("adapter_capture.sample_rate", "must be a number above 0 and at most 1, got 1.5")
    ]
    endpoint = build_endpoint(new_stack())
    with pytest.raises(ConfigurationError) as caught:
        endpoint.add_adapter(
            "support-v1", artifact=published("support-v1"), capture=CaptureSettings(max_bytes=10, redact=("images",))
        )
    assert [(p.subject, p.field) for p in caught.value.problems] == [
        ("adapter 'support-v1' of MultiAdapterEndpoint 'Test-Stack/Serving'", "capture.max_bytes"),
        ("adapter 'support-v1' of MultiAdapterEndpoint 'Test-Stack/Serving'", "capture.redact"),
    ]
    assert "support-v1" not in endpoint.adapters


def test_a_manifest_rows_capture_is_validated_and_read_as_the_contracts_settings(tmp_path):
    source = "s3://example-adapters/adapters/{}/adapter.tar.gz"
    bad = write_manifest(
        tmp_path,
        [
            {
                "name": "bulk-v1",
                "source": source.format("bulk-v1"),
                "capture": {"sample_rate": 0, "redact": ["images"], "to": "s3"},
            },
        ],
        name="bad.yaml",
    )
    with pytest.raises(ConfigurationError) as caught:
        load_manifest(bad)
    assert sorted((p.subject, p.field) for p in caught.value.problems) == [
        ("adapter 'bulk-v1'", "capture.redact.0"),
        ("adapter 'bulk-v1'", "capture.sample_rate"),
        ("adapter 'bulk-v1'", "capture.to"),
    ]
    good = write_manifest(
        tmp_path,
        [
            {"name": "bulk-v1", "source": source.format("bulk-v1"), "capture": True},
            {
                "name": "chat-v1",
                "source": source.format("chat-v1"),
                "capture": {"sample_rate": 0.1, "redact": ["prompt", "messages"]},
            },
            {"name": "quiet-v1", "source": source.format("quiet-v1"), "capture": False},
        ],
        name="good.yaml",
    )
    rows = {row.name: row.capture for row in load_manifest(good).manifest.adapters}
    assert rows["bulk-v1"].to_settings() == CaptureSettings() and rows["quiet-v1"] is None
    assert rows["chat-v1"].to_settings() == CaptureSettings(sample_rate=0.1, redact=("prompt", "messages"))


# ------------------------------------------------------------------ one stream per adapter


def test_capture_on_names_the_capture_group_the_container_writes_each_adapters_stream_to():
    """The container is given the group's ARN; it writes each adapter's records to its own stream,
    and the stream a reader is granted is named by the same contract function."""
    from aws_cdk import Environment

    from cdk_adapters.contract.capture_record import CAPTURE_LOG_GROUP_ENV, capture_stream, log_group_from_arn

    stack = new_stack(env=Environment(account="123456789012", region="eu-west-1"))
    endpoint = build_endpoint(stack, adapter_capture=CaptureSettings())
    endpoint.add_adapter("support-v1", artifact=published("support-v1"))
    environment = model_environment(stack)
    arn = environment[CAPTURE_LOG_GROUP_ENV]
    assert arn == f"arn:aws:logs:eu-west-1:123456789012:log-group:/cdk-adapters/capture/{endpoint.endpoint_name}"
    settings, problems = ServingSettings.from_environ(environment)
    assert problems == [] and settings.capture_log_group_arn == arn
    assert log_group_from_arn(arn) == ("eu-west-1", f"/cdk-adapters/capture/{endpoint.endpoint_name}")
    names = {g["Properties"]["LogGroupName"] for g in Template.from_stack(stack).find_resources("AWS::Logs::LogGroup").values()}
    assert log_group_from_arn(arn)[1] in names
    assert capture_stream("Support-V1") == "support-v1" and capture_stream(None) == "_base-model"


def test_capture_off_renders_no_capture_group_variable():
    from cdk_adapters.contract.capture_record import CAPTURE_LOG_GROUP_ENV

    stack = new_stack()
    build_endpoint(stack).add_adapter("support-v1", artifact=published("support-v1"))
    assert CAPTURE_LOG_GROUP_ENV not in model_environment(stack)


def test_a_reader_is_granted_exactly_its_adapters_streams_and_nothing_group_wide():
    from aws_cdk import Environment
    from aws_cdk import aws_iam as iam

    stack = new_stack(env=Environment(account="123456789012", region="eu-west-1"))
    endpoint = build_endpoint(stack, adapter_capture=CaptureSettings())
    for name in ("support-v1", "billing-v1"):
        endpoint.add_adapter(name, artifact=published(name))
    reader = iam.Role(stack, "SupportTeam", assumed_by=iam.AccountRootPrincipal())
    endpoint.grant_read_capture(reader, ["Support-V1"])
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    [statement] = [
        s
        for p in policies.values()
        if p["Properties"]["Roles"] == [{"Ref": stack.get_logical_id(reader.node.default_child)}]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    group = f"arn:aws:logs:eu-west-1:123456789012:log-group:/cdk-adapters/capture/{endpoint.endpoint_name}"
    assert statement["Action"] == "logs:GetLogEvents"
    assert deployed(statement["Resource"]) == f"{group}:log-stream:support-v1"
    with pytest.raises(ConfigurationError, match=r"grant_read_capture.adapters.*'other-v1' is not an adapter"):
        endpoint.grant_read_capture(reader, ["other-v1"])
    with pytest.raises(ConfigurationError, match="name at least one adapter"):
        endpoint.grant_read_capture(reader, [])
