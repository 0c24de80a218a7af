"""Read access by location: one grant per declared bucket prefix, never one per adapter.

Published adapters must lie inside a declared `AdapterLocation` (with its KMS key); local archives
(CDK assets) are granted object by object, and synth refuses them before IAM's per-role limit.
"""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.endpoint.execution_role import ROLE_INLINE_POLICY_LIMIT
from cdk_adapters.private.nag_acknowledgments import REASON_ADAPTER_LOCATION, flatten_reference
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import build_endpoint, new_stack, real_archives
from tests.support.synth_refusal import refused_at_synth

SUBJECT = "adapter 'tenant-a-v1' of MultiAdapterEndpoint 'Test-Stack/Serving'"


def statements(template: Template) -> list[dict]:
    return [
        statement
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def refused(endpoint, name: str, artifact: AdapterArtifact) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as caught:
        endpoint.add_adapter(name, artifact=artifact)
    assert name.lower() not in endpoint.fleet.components, "a refused adapter leaves nothing behind"
    assert endpoint.fleet.node.try_find_child(name) is None
    return caught.value


def endpoint_with_adapters(count: int):
    endpoint = build_endpoint(adapter_locations=[AdapterLocation.from_s3_url("s3://tenant-adapters/published")])
    for index in range(count):
        name = f"tenant-{index}-v1"
        endpoint.add_adapter(name, artifact=AdapterArtifact.from_s3_url(f"s3://tenant-adapters/published/{name}/adapter.tar.gz"))
    return endpoint


def test_one_read_grant_per_location_whatever_the_adapter_count():
    none, thirty = endpoint_with_adapters(0), endpoint_with_adapters(30)
    found = statements(Template.from_stack(cdk.Stack.of(thirty)))
    before = statements(Template.from_stack(cdk.Stack.of(none)))
    assert json.dumps(found, sort_keys=True) == json.dumps(before, sort_keys=True), "adapters leave every policy as it was"
    assert none.permissions.characters() == thirty.permissions.characters()
    [read] = [s for s in found if "tenant-adapters" in json.dumps(s)]
    assert read["Action"] == "s3:GetObject"
    # The prefix gains its '/': 'published' never also covers 'published-old/'.
    assert flatten_reference(read["Resource"]) == "arn:<AWS::Partition>:s3:::tenant-adapters/published/*"


def test_an_artifact_outside_every_location_names_the_adapter_and_field_and_creates_nothing():
    endpoint = build_endpoint(adapter_locations=[AdapterLocation.from_s3_url("s3://tenant-adapters/published/")])
    for url in (
        "s3://other-bucket/published/tenant-a-v1/adapter.tar.gz",  # another bucket
        "s3://tenant-adapters/published-old/tenant-a-v1.tar.gz",  # a sibling prefix
        "s3://tenant-adapters/drafts/tenant-a-v1.tar.gz",
    ):
        error = refused(endpoint, "tenant-a-v1", AdapterArtifact.from_s3_url(url))
        [problem] = error.problems
        assert (problem.subject, problem.field) == (SUBJECT, "artifact.url")
        assert url in problem.message and "s3://tenant-adapters/published/" in problem.message
    assert endpoint.fleet.components == {}
    assert Template.from_stack(cdk.Stack.of(endpoint)).find_resources("AWS::SageMaker::InferenceComponent").keys() == {
        next(iter(Template.from_stack(cdk.Stack.of(endpoint)).find_resources("AWS::SageMaker::InferenceComponent")))
    }  # the base component only


def test_no_location_declared_says_how_to_declare_one():
    endpoint = build_endpoint(adapter_locations=[])
    error = refused(endpoint, "tenant-a-v1", AdapterArtifact.from_s3_url("s3://example-adapters/a/v1.tar.gz"))
    assert "declared: none" in str(error) and "AdapterLocation.from_s3_url" in str(error)


def test_a_location_added_later_admits_its_adapters():
    endpoint = build_endpoint(adapter_locations=[])
    endpoint.add_adapter_location(AdapterLocation.from_s3_url("s3://late-adapters/"))
    endpoint.add_adapter("tenant-a-v1", artifact=AdapterArtifact.from_s3_url("s3://late-adapters/x/tenant-a-v1.tar.gz"))
    found = statements(Template.from_stack(cdk.Stack.of(endpoint)))
    assert [flatten_reference(s["Resource"]) for s in found if "late-adapters" in json.dumps(s)] == [
        "arn:<AWS::Partition>:s3:::late-adapters/*"
    ]


def test_bad_locations_are_reported_together_with_their_index():
    stack = new_stack()
    with pytest.raises(ConfigurationError) as caught:
        build_endpoint(
            stack,
            adapter_locations=[
                AdapterLocation.from_s3_url("s3://ok-bucket/adapters/"),
                AdapterLocation.from_s3_url("https://example.com/adapters/"),
                AdapterLocation.from_s3_url("s3://ab/adapters/"),
                AdapterLocation.from_s3_url("s3://ok-bucket/adapters/*"),
            ],
        )
    fields = [(p.field, p.message) for p in caught.value.problems]
    assert [field for field, _ in fields] == ["adapter_locations[1]", "adapter_locations[2]", "adapter_locations[3]"]
    assert "must start with 's3://'" in fields[0][1]
    assert "bucket 'ab' is 2 character(s); S3 bucket names are 3 to 63" in fields[1][1]
    assert "wildcards" in fields[2][1]
    assert stack.node.try_find_child("Serving") is None or not stack.node.find_child("Serving").node.children


def test_a_bucket_location_with_a_wildcard_prefix_is_refused():
    stack = new_stack()
    bucket = s3.Bucket.from_bucket_name(stack, "AdapterBucket", "tenant-adapters")
    with pytest.raises(ConfigurationError) as caught:
        build_endpoint(stack, adapter_locations=[AdapterLocation.from_bucket(bucket, "adapters*")])
    [problem] = caught.value.problems
    assert problem.field == "adapter_locations[0]" and "wildcards are added by the grant" in problem.message


def test_an_encrypted_bucket_location_grants_decrypt_on_its_key_only():
    stack = new_stack()
    key = kms.Key(stack, "AdapterKey", enable_key_rotation=True)
    bucket = s3.Bucket(stack, "AdapterBucket", encryption_key=key, enforce_ssl=True)
    endpoint = build_endpoint(stack, adapter_locations=[AdapterLocation.from_bucket(bucket, "tenants")])
    endpoint.add_adapter("tenant-a-v1", artifact=AdapterArtifact.from_bucket(bucket, "tenants/tenant-a-v1.tar.gz"))
    template = Template.from_stack(stack)
    key_id = stack.get_logical_id(key.node.default_child)
    decrypts = [s for s in statements(template) if s["Action"] == "kms:Decrypt"]
    assert [s["Resource"] for s in decrypts] == [{"Fn::GetAtt": [key_id, "Arn"]}]
    # The same bucket outside the declared prefix is refused, on the field the artifact came from.
    error = refused(endpoint, "tenant-b-v1", AdapterArtifact.from_bucket(bucket, "other/tenant-b-v1.tar.gz"))
    assert [p.field for p in error.problems] == ["artifact.key"]


def test_an_object_key_its_location_does_not_declare_is_refused():
    stack = new_stack()
    adapter_key = kms.Key(stack, "AdapterKey", enable_key_rotation=True)
    plain = build_endpoint(stack)  # the default test location, no key
    error = refused(
        plain, "tenant-a-v1", AdapterArtifact.from_s3_url("s3://example-adapters/a.tar.gz", encryption_key=adapter_key)
    )
    assert [p.field for p in error.problems] == ["artifact.encryption_key"]
    keyed = build_endpoint(
        stack, "Keyed", adapter_locations=[AdapterLocation.from_s3_url("s3://example-adapters/", encryption_key=adapter_key)]
    )
    keyed.add_adapter(
        "tenant-a-v1", artifact=AdapterArtifact.from_s3_url("s3://example-adapters/a.tar.gz", encryption_key=adapter_key)
    )
    keyed.add_adapter("tenant-b-v1", artifact=AdapterArtifact.from_s3_url("s3://example-adapters/b.tar.gz"))


def test_location_wildcards_are_acknowledged_with_their_reason():
    endpoint = build_endpoint()
    policy = endpoint.permissions.policy
    acknowledged = {
        key: reason
        for entry in policy.node.metadata
        if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
        for key, reason in entry.data.items()
    }
    location = [reason for key, reason in acknowledged.items() if "example-adapters/*" in key]
    assert location == [REASON_ADAPTER_LOCATION]


def test_local_archives_get_exact_object_grants_in_one_extra_policy(tmp_path, zoo):
    stack = cdk.Stack(cdk.App(outdir=str(tmp_path / "out")), "Test-Stack")
    endpoint = build_endpoint(stack)
    for index, path in enumerate(real_archives(zoo, tmp_path / "archives", 3)):
        endpoint.add_adapter(f"local-{index}-v1", artifact=AdapterArtifact.from_archive(path))
    template = Template.from_stack(stack)
    [local_policy] = [p for k, p in template.find_resources("AWS::IAM::Policy").items() if "LocalArchivePolicy" in k]
    [read] = local_policy["Properties"]["PolicyDocument"]["Statement"]
    assert read["Action"] == "s3:GetObject" and len(read["Resource"]) == 3
    assert all("*" not in json.dumps(resource) for resource in read["Resource"])
    # Every local component waits for the policy that lets SageMaker read its archive.
    local_policy_id = next(k for k in template.find_resources("AWS::IAM::Policy") if "LocalArchivePolicy" in k)
    components = [
        c
        for c in template.find_resources("AWS::SageMaker::InferenceComponent").values()
        if "BaseInferenceComponentName" in c["Properties"]["Specification"]
    ]
    assert all(local_policy_id in component["DependsOn"] for component in components)


def test_too_many_local_archives_fail_synth_before_iams_limit(tmp_path, zoo):
    app = cdk.App(outdir=str(tmp_path / "out"))
    stack = cdk.Stack(app, "Test-Stack")
    endpoint = build_endpoint(stack)
    for index, path in enumerate(real_archives(zoo, tmp_path / "archives", 70)):
        endpoint.add_adapter(f"local-{index}-v1", artifact=AdapterArtifact.from_archive(path))
    assert endpoint.permissions.characters() > ROLE_INLINE_POLICY_LIMIT
    with refused_at_synth() as caught:
        app.synth()
    message = str(caught.value)
    assert "Test-Stack/Serving/ExecutionRolePolicy" in message
    assert f"over IAM's {ROLE_INLINE_POLICY_LIMIT} per role; 70 local adapter archive(s)" in message
    assert "cdk-adapters publish" in message
    assert not list((tmp_path / "out").glob("*.template.json")), "nothing is written"
