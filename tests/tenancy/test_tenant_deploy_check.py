"""A tenant stack's own deploy check: after the tenant's deployment it invokes the tenant's new or
changed adapters, with a policy naming the endpoint and the tenant's components only (the
platform's and other tenants' share the prefix). Synthesized, nag packs and cfn-lint clean."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.deploy_check.deploy_check import RESOURCE_TYPE, AdapterCheck, DeployCheck
from cdk_adapters.deploy_check.handler import index
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import ADAPTER_BUCKET_URL, real_archives
from tests.constructs.test_nag_lint_composition import cfn_lint, nag_violations, synth_to
from tests.tenancy.test_tenant_app import ROLE_ARN, platform  # noqa: F401  (the fixture)

TENANT_ADAPTERS = ("acme-chat-v1", "acme-search-v1")


def published(name: str) -> AdapterArtifact:
    return AdapterArtifact.from_s3_url(f"{ADAPTER_BUCKET_URL}{name}/adapter.tar.gz")


def imported(stack: cdk.Stack, endpoint: MultiAdapterEndpoint, text: str):
    return MultiAdapterEndpoint.from_endpoint_attributes(
        stack,
        "Serving",
        endpoint_name=endpoint.endpoint_name,
        base_component_name=endpoint.base_component_name,
        component_prefix=endpoint.component_prefix,
        serving_reference=DiscoveryRecord.from_json(text).serving,
        execution_role_arn=ROLE_ARN,
    )


def resources(stack: cdk.Stack) -> dict:
    return stack.resolve(Template.from_stack(stack).to_json())["Resources"]


def only(template: dict, resource_type: str) -> tuple[str, dict]:
    [(logical_id, resource)] = [(k, r) for k, r in template.items() if r["Type"] == resource_type]
    return logical_id, resource


def check_statements(template: dict) -> dict:
    [policy] = [r for k, r in template.items() if r["Type"] == "AWS::IAM::Policy" and "DeployCheckPolicy" in k]
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def arn_tail(value) -> str:
    return value["Fn::Join"][1][-1]


def test_a_tenant_check_invokes_only_the_tenants_components_after_they_deploy(platform, zoo, tmp_path):
    endpoint, _, text = platform
    app = cdk.App(outdir=str(tmp_path / "tenant.out"))
    stack = cdk.Stack(app, "Tenant-Acme")
    serving = imported(stack, endpoint, text)
    [archive] = real_archives(zoo, tmp_path, 1)
    serving.add_adapter(TENANT_ADAPTERS[0], artifact=AdapterArtifact.from_archive(archive))  # before the check: tracked too
    check = serving.add_deploy_check(DeployCheck(concurrency=2))
    serving.add_adapter(TENANT_ADAPTERS[1], artifact=published(TENANT_ADAPTERS[1]), check=AdapterCheck(expect_text="found"))
    template = resources(stack)

    _, custom = only(template, RESOURCE_TYPE)
    properties = custom["Properties"]
    assert (properties["EndpointName"], properties["ComponentPrefix"]) == (endpoint.endpoint_name, endpoint.component_prefix)
    assert sorted(properties["Adapters"]) == list(TENANT_ADAPTERS) == sorted(check.adapters)
    components = {
        r["Properties"]["InferenceComponentName"]: k
        for k, r in template.items()
        if r["Type"] == "AWS::SageMaker::InferenceComponent"
    }
    assert set(components.values()) <= set(custom["DependsOn"]), "the check runs after the tenant's components"
    # What the handler invokes on Create: exactly the tenant's components, by the naming rule.
    targets = index.targets(properties, index.changed_adapters(properties, None))
    assert sorted(t.component for t in targets) == sorted(components) == [f"{endpoint.prefix}-{name}" for name in TENANT_ADAPTERS]
    assert [t.expect_text for t in targets] == [None, "found"]

    statements = check_statements(template)
    invoke = statements["InvokeAdapterComponents"]
    assert [arn_tail(r) for r in invoke["Resource"]] == [f":endpoint/{endpoint.endpoint_name}"] + [
        f":inference-component/{name}" for name in sorted(components)
    ]
    assert "*" not in json.dumps(invoke), "no pattern: the platform's and other tenants' components share the prefix"
    assert arn_tail(statements["NeverTheBaseComponent"]["Resource"]) == f":inference-component/{endpoint.base_component_name}"
    assert "LambdaNetworkInterfaces" not in statements
    environment = only({k: r for k, r in template.items() if "DeployCheckFunction" in k}, "AWS::Lambda::Function")[1]
    assert environment["Properties"]["Environment"]["Variables"]["CHECK_CONCURRENCY"] == "2"

    assert nag_violations(stack) == []
    result = cfn_lint(synth_to(app))
    assert result.returncode == 0, result.stdout + result.stderr


def test_adding_one_tenant_adapter_changes_only_the_checks_entries_and_policy(platform):
    endpoint, _, text = platform

    def synthesized(names):
        stack = cdk.Stack(cdk.App(), "Tenant-Acme")
        serving = imported(stack, endpoint, text)
        serving.add_deploy_check()
        for name in names:
            serving.add_adapter(name, artifact=published(name))
        return resources(stack)

    before, after = synthesized(TENANT_ADAPTERS), synthesized((*TENANT_ADAPTERS, "acme-triage-v1"))
    added = set(after) - set(before)
    assert {after[k]["Type"] for k in added} == {"AWS::SageMaker::InferenceComponent"}
    changed = {k for k in before if before[k] != after[k]}
    assert {before[k]["Type"] for k in changed} == {RESOURCE_TYPE, "AWS::IAM::Policy"}
    assert index.changed_adapters(only(after, RESOURCE_TYPE)[1]["Properties"], only(before, RESOURCE_TYPE)[1]["Properties"]) == [
        "acme-triage-v1"
    ]


def test_in_a_tenant_vpc_the_check_runs_in_its_subnets_and_stays_nag_clean(platform, tmp_path):
    endpoint, _, text = platform
    app = cdk.App(outdir=str(tmp_path / "tenant.out"))
    stack = cdk.Stack(app, "Tenant-Acme")
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-12345678", availability_zones=["us-east-1a"], private_subnet_ids=["subnet-aaaa1111"]
    )
    serving = imported(stack, endpoint, text)
    serving.add_deploy_check(vpc=vpc)
    serving.add_adapter(TENANT_ADAPTERS[0], artifact=published(TENANT_ADAPTERS[0]))
    template = resources(stack)
    [function] = [r for k, r in template.items() if r["Type"] == "AWS::Lambda::Function" and "DeployCheckFunction" in k]
    assert function["Properties"]["VpcConfig"]["SubnetIds"] == ["subnet-aaaa1111"]
    assert "LambdaNetworkInterfaces" in check_statements(template)
    assert nag_violations(stack) == []
    result = cfn_lint(synth_to(app))
    assert result.returncode == 0, result.stdout + result.stderr


def test_what_a_tenant_check_refuses(platform):
    endpoint, _, text = platform
    stack = cdk.Stack(cdk.App(), "Tenant-Acme")
    serving = imported(stack, endpoint, text)
    with pytest.raises(ConfigurationError, match=r"check: needs this stack's deploy check: call add_deploy_check"):
        serving.add_adapter(TENANT_ADAPTERS[0], artifact=published(TENANT_ADAPTERS[0]), check=AdapterCheck(expect_text="ok"))
    assert serving.adapters == {}
    with pytest.raises(ConfigurationError) as caught:
        serving.add_deploy_check(DeployCheck(wake_attempts=0, concurrency=99), vpc_subnets=ec2.SubnetSelection())
    text_ = str(caught.value)
    for field in ("deploy_check.wake_attempts", "deploy_check.concurrency", "vpc_subnets: needs vpc"):
        assert field in text_, field
    assert serving.deploy_check is None
    serving.add_deploy_check()
    with pytest.raises(ConfigurationError, match="add_deploy_check: is already called"):
        serving.add_deploy_check()
    with pytest.raises(ConfigurationError) as caught:
        serving.add_adapter(TENANT_ADAPTERS[0], artifact=published(TENANT_ADAPTERS[0]), check=AdapterCheck(expect_text=""))
    assert "adapter 'acme-chat-v1'" in str(caught.value) and "check.expect_text" in str(caught.value)
    assert serving.adapters == {} and serving.deploy_check.adapters == {}


def test_a_tenant_check_naming_more_components_than_iams_policy_size_allows_fails_synth(platform):
    endpoint, _, text = platform
    app = cdk.App()
    stack = cdk.Stack(app, "Tenant-Acme")
    serving = imported(stack, endpoint, text)
    serving.add_deploy_check()
    for index_ in range(100):
        serving.add_adapter(f"acme-{index_:03d}-v1", artifact=published(f"acme-{index_:03d}-v1"))
    with pytest.raises(
        Exception, match=r"names each of this stack's 100 adapter components .* Add further adapters from another tenant stack"
    ):
        app.synth()
