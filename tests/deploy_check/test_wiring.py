"""The deploy check's wiring, synthesized: its resources, IAM policy, order after the adapter
components (in the endpoint's stack and in shards), network placement, the three nag packs,
cfn-lint, and bad settings refused with every problem at once.

The 1,000-adapter case runs in tests/fleet/test_fleet_scale.py, on that module's shared syntheses.
"""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from cdk_adapters import Networking
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.deploy_check.deploy_check import RESOURCE_TYPE, AdapterCheck, DeployCheck
from cdk_adapters.deploy_check.handler import index
from cdk_adapters.endpoint.fleet import FleetPlacement
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import build_endpoint
from tests.constructs.test_nag_lint_composition import cfn_lint, nag_violations, synth_to

URL = "s3://example-adapters/{}/adapter.tar.gz"


def artifact(name: str, version: str = "") -> AdapterArtifact:
    return AdapterArtifact.from_s3_url(URL.format(name + version))


def endpoint_with_check(stack: cdk.Stack, adapters=("support-en-v1",), **overrides):
    endpoint = build_endpoint(stack, deploy_check=DeployCheck(), **overrides)
    for name in adapters:
        endpoint.add_adapter(name, artifact=artifact(name))
    return endpoint


def only(template: dict, resource_type: str) -> tuple[str, dict]:
    [(logical_id, resource)] = [(k, r) for k, r in template["Resources"].items() if r["Type"] == resource_type]
    return logical_id, resource


def check_policy(template: dict) -> dict:
    [policy] = [
        r
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::IAM::Policy" and k.startswith("ServingDeployCheckPolicy")
    ]
    return policy["Properties"]["PolicyDocument"]


def test_one_adapter_gets_a_custom_resource_after_its_component_with_a_least_privilege_function():
    stack = cdk.Stack(cdk.App(), "Check-One")
    endpoint = endpoint_with_check(stack)
    template = Template.from_stack(stack).to_json()
    _, check = only(template, RESOURCE_TYPE)
    [component_id] = [
        k for k, r in template["Resources"].items() if r["Type"] == "AWS::SageMaker::InferenceComponent" and "Adapters" in k
    ]
    base_id = stack.get_logical_id(endpoint.base_component.resource)
    properties = check["Properties"]
    assert properties["ComponentPrefix"] == endpoint.prefix
    assert json.loads(properties["Request"]) == {"prompt": "Hello", "max_tokens": 8, "temperature": 0}
    assert list(properties["Adapters"]) == ["support-en-v1"] and len(properties["Adapters"]["support-en-v1"]) == 16
    assert "Checks" not in properties
    assert properties["ServiceTimeout"] == "1200"  # CloudFormation stops waiting after 20 minutes, not an hour
    assert {component_id, base_id} <= set(check["DependsOn"])
    _, function = only(
        {"Resources": {k: r for k, r in template["Resources"].items() if "DeployCheckFunction" in k}}, "AWS::Lambda::Function"
    )
    assert function["Properties"]["Runtime"] == "python3.14" and function["Properties"]["Handler"] == "index.on_event"
    assert function["Properties"]["Timeout"] == 840 and "VpcConfig" not in function["Properties"]
    assert function["Properties"]["Environment"]["Variables"] == {
        "CHECK_TIMEOUT_SECONDS": "60",
        "CHECK_WAKE_ATTEMPTS": "20",
        "CHECK_RETRY_INTERVAL_SECONDS": "30",
        "CHECK_CONCURRENCY": "4",
    }
    groups = [r for k, r in template["Resources"].items() if r["Type"] == "AWS::Logs::LogGroup" and "DeployCheck" in k]
    assert len(groups) == 2 and all(g["Properties"]["RetentionInDays"] == 365 for g in groups)


def test_the_policy_invokes_only_this_endpoints_adapter_components_never_the_base():
    stack = cdk.Stack(cdk.App(), "Check-Policy")
    endpoint = endpoint_with_check(stack)
    document = stack.resolve(Template.from_stack(stack).to_json()["Resources"])
    statements = {s["Sid"]: s for s in check_policy({"Resources": document})["Statement"]}
    assert set(statements) == {"InvokeAdapterComponents", "NeverTheBaseComponent", "WriteOwnLogs", "ReadOwnStackStatus"}
    assert statements["ReadOwnStackStatus"]["Resource"] == {"Ref": "AWS::StackId"}

    def arn_tail(value) -> str:
        return value["Fn::Join"][1][-1]

    invoke = statements["InvokeAdapterComponents"]
    assert invoke["Effect"] == "Allow" and invoke["Action"] == "sagemaker:InvokeEndpoint"
    assert [arn_tail(r) for r in invoke["Resource"]] == [
        f":endpoint/{endpoint.prefix}",
        f":inference-component/{endpoint.prefix}-*",
    ]
    deny = statements["NeverTheBaseComponent"]
    assert deny["Effect"] == "Deny" and arn_tail(deny["Resource"]) == f":inference-component/{endpoint.base_component_name}"
    assert statements["WriteOwnLogs"]["Action"] == ["logs:CreateLogStream", "logs:PutLogEvents"]


def test_components_in_shards_are_waited_for_through_their_nested_stacks():
    stack = cdk.Stack(cdk.App(), "Check-Shards")
    names = [f"tenant-{i:02d}-v1" for i in range(12)]
    endpoint = endpoint_with_check(stack, adapters=names, placement=FleetPlacement())
    template = Template.from_stack(stack).to_json()
    _, check = only(template, RESOURCE_TYPE)
    shard_ids = {stack.get_logical_id(shard.nested_stack_resource) for shard in endpoint.fleet.shards.values()}
    assert len(shard_ids) > 1 and shard_ids <= set(check["DependsOn"])
    assert sorted(check["Properties"]["Adapters"]) == sorted(names)


def test_adding_one_adapter_changes_only_its_entry_and_the_handler_checks_only_it():
    def synthesized(names):
        stack = cdk.Stack(cdk.App(), "Check-Add")
        endpoint_with_check(stack, adapters=names)
        return Template.from_stack(stack).to_json()

    before, after = (
        synthesized(["support-en-v1", "support-de-v1"]),
        synthesized(["support-en-v1", "support-de-v1", "support-fr-v1"]),
    )
    old, new = only(before, RESOURCE_TYPE)[1]["Properties"], only(after, RESOURCE_TYPE)[1]["Properties"]
    assert {k: v for k, v in new["Adapters"].items() if k != "support-fr-v1"} == old["Adapters"]
    assert index.changed_adapters(new, old) == ["support-fr-v1"]
    changed = {k for k in before["Resources"] if before["Resources"][k] != after["Resources"].get(k)}
    assert {before["Resources"][k]["Type"] for k in changed} == {RESOURCE_TYPE}


def test_a_new_artifact_or_check_request_makes_the_adapter_changed():
    def entry(version: str = "", check: AdapterCheck | None = None) -> str:
        stack = cdk.Stack(cdk.App(), "Check-Digest")
        endpoint = build_endpoint(stack, deploy_check=DeployCheck())
        endpoint.add_adapter("support-en-v1", artifact=artifact("support-en-v1", version), check=check)
        return endpoint.deploy_check.adapters["support-en-v1"]

    assert entry() == entry()
    assert len({entry(), entry("-rebuilt"), entry(check=AdapterCheck(expect_text="days"))}) == 3


def test_an_adapters_own_check_is_rendered_for_the_handler():
    stack = cdk.Stack(cdk.App(), "Check-Own")
    endpoint = build_endpoint(stack, deploy_check=DeployCheck())
    endpoint.add_adapter(
        "extract-v1",
        artifact=artifact("extract-v1"),
        check=AdapterCheck(body={"messages": [{"role": "user", "content": "Extract"}]}, expect_json_keys=["name"]),
    )
    _, check = only(Template.from_stack(stack).to_json(), RESOURCE_TYPE)
    [target] = index.targets(check["Properties"], ["extract-v1"])
    assert target.body == {"messages": [{"role": "user", "content": "Extract"}]} and target.expect_json_keys == ("name",)
    assert target.component == endpoint.adapter_component_names()["extract-v1"]


def test_in_a_vpc_the_check_function_runs_in_the_endpoints_subnets_with_https_egress_only():
    stack = cdk.Stack(cdk.App(), "Check-Vpc")
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-12345678",
        availability_zones=["us-east-1a", "us-east-1b"],
        private_subnet_ids=["subnet-aaaa1111", "subnet-bbbb2222"],
    )
    endpoint_with_check(stack, networking=Networking(vpc=vpc))
    template = Template.from_stack(stack).to_json()
    [function] = [r for k, r in template["Resources"].items() if k.startswith("ServingDeployCheckFunction")]
    assert function["Properties"]["VpcConfig"]["SubnetIds"] == ["subnet-aaaa1111", "subnet-bbbb2222"]
    [group] = [r for k, r in template["Resources"].items() if k.startswith("ServingDeployCheckSecurityGroup")]
    assert group["Properties"]["SecurityGroupEgress"] == [
        {
            "CidrIp": "0.0.0.0/0",
            "Description": "HTTPS to the SageMaker runtime (VPC endpoint or NAT)",
            "FromPort": 443,
            "IpProtocol": "tcp",
            "ToPort": 443,
        }
    ]
    assert "SecurityGroupIngress" not in group["Properties"]
    statements = {s["Sid"] for s in check_policy(template)["Statement"]}
    assert "LambdaNetworkInterfaces" in statements
    assert nag_violations(stack) == []


def test_nag_packs_and_cfn_lint_find_nothing(tmp_path):
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Check-Lint")
    endpoint = endpoint_with_check(stack, adapters=["support-en-v1", "support-de-v1"])
    endpoint.add_adapter("extract-v1", artifact=artifact("extract-v1"), check=AdapterCheck(expect_text="ok"))
    assert nag_violations(stack) == []
    result = cfn_lint(synth_to(app))
    assert result.returncode == 0, result.stdout + result.stderr


def test_bad_settings_are_refused_with_every_problem_at_once():
    with pytest.raises(ConfigurationError) as raised:
        build_endpoint(
            cdk.Stack(cdk.App(), "Check-Bad"),
            deploy_check=DeployCheck(
                body={"model": "x", "stream": True}, timeout=cdk.Duration.minutes(20), wake_attempts=0, concurrency=99
            ),
        )
    text = str(raised.value)
    for field in (
        'deploy_check.body: needs "prompt"',
        "deploy_check.body.model: must be left out",
        "deploy_check.body.stream",
        "deploy_check.timeout",
        "deploy_check.wake_attempts: must be an integer from 1 to 100",
        "deploy_check.concurrency",
    ):
        assert field in text, field


def test_a_wait_that_cannot_fit_in_one_lambda_run_is_refused():
    with pytest.raises(
        ConfigurationError, match=r"deploy_check.wake_attempts: \(30\) x retry_interval \(60 s\) plus timeout \(60 s\) is 1800 s"
    ):
        build_endpoint(
            cdk.Stack(cdk.App(), "Check-Long"),
            deploy_check=DeployCheck(wake_attempts=30, retry_interval=cdk.Duration.seconds(60)),
        )


def test_an_adapter_check_is_refused_naming_the_adapter_and_field_and_nothing_is_added():
    stack = cdk.Stack(cdk.App(), "Check-Row")
    endpoint = build_endpoint(stack, deploy_check=DeployCheck())
    with pytest.raises(ConfigurationError) as raised:
        endpoint.add_adapter(
            "support-en-v1",
            artifact=artifact("support-en-v1"),
            check=AdapterCheck(body={"prompt": "x" * 3000}, expect_text="", expect_json_keys="name"),
        )
    text = str(raised.value)
    assert "adapter 'support-en-v1'" in text
    for field in ("check.body: is 3", "check.expect_text", "check.expect_json_keys"):
        assert field in text, field
    assert endpoint.adapters == {} and endpoint.deploy_check.adapters == {}


def test_an_adapter_check_without_the_endpoints_deploy_check_is_refused():
    endpoint = build_endpoint(cdk.Stack(cdk.App(), "Check-Off"))
    with pytest.raises(
        ConfigurationError, match=r"check: needs the endpoint's deploy check: MultiAdapterEndpoint\(deploy_check=DeployCheck"
    ):
        endpoint.add_adapter("support-en-v1", artifact=artifact("support-en-v1"), check=AdapterCheck(expect_text="ok"))


def test_off_by_default():
    stack = cdk.Stack(cdk.App(), "Check-Default")
    endpoint = build_endpoint(stack)
    endpoint.add_adapter("support-en-v1", artifact=artifact("support-en-v1"))
    assert endpoint.deploy_check is None
    assert Template.from_stack(stack).find_resources(RESOURCE_TYPE) == {}


@pytest.mark.parametrize("in_vpc", [False, True])
def test_acknowledgments_only_cover_what_was_found(monkeypatch, in_vpc):
    """Built with the check's acknowledgments withheld, the packs find exactly what they name."""
    from cdk_nag import AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks

    from cdk_adapters.private import nag_acknowledgments

    withheld: set[tuple[str, str]] = set()
    real = nag_acknowledgments.acknowledge

    def record(construct, acknowledgments):
        acknowledgments = list(acknowledgments)
        if "/DeployCheck" in construct.node.path:
            withheld.update((a.id, construct.node.path) for a in acknowledgments)
        else:
            real(construct, acknowledgments)

    monkeypatch.setattr(nag_acknowledgments, "acknowledge", record)
    stack = cdk.Stack(cdk.App(), f"Check-Withheld-{in_vpc}")
    overrides = {}
    if in_vpc:
        vpc = ec2.Vpc.from_vpc_attributes(
            stack, "Vpc", vpc_id="vpc-12345678", availability_zones=["us-east-1a"], private_subnet_ids=["subnet-aaaa1111"]
        )
        overrides["networking"] = Networking(vpc=vpc)
    endpoint_with_check(stack, **overrides)
    found = {
        (violation.rule_name, resource.construct_path)
        for pack in (AwsSolutionsChecks(), HIPAASecurityChecks(), NIST80053R5Checks())
        for violation in pack.validate_scope(stack).violations
        for resource in violation.violating_resources
    }
    assert found and all("/DeployCheck/" in path for _, path in found)
    assert {rule for rule, _ in withheld} == {rule for rule, _ in found}
    for rule, path in found:
        assert any(rule == r and (path == p or path.startswith(p + "/")) for r, p in withheld), (rule, path)
