"""cdk-nag (three packs) and cfn-lint on synthesized templates, and composing endpoints into larger apps."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks

from cdk_adapters import Instances, Networking
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.private import nag_acknowledgments
from cdk_adapters.private.nag_acknowledgments import flatten_reference
from tests.constructs.conftest import VENV_BIN, build_endpoint

URL = "s3://example-adapters/{}/v1/adapter.tar.gz"
CFN_LINT_ERROR = 2
"""cfn-lint's exit code is a bit mask: 2 errors, 4 warnings, 8 informational."""


def nag_violations(scope) -> list[str]:
    found = []
    for pack in (AwsSolutionsChecks(), HIPAASecurityChecks(), NIST80053R5Checks()):
        report = pack.validate_scope(scope)
        found += [f"{v.rule_name} at {[r.construct_path for r in v.violating_resources]}" for v in report.violations]
    return found


def cfn_lint(paths: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VENV_BIN / "cfn-lint"), *map(str, paths)], capture_output=True, text=True, timeout=600)


def endpoint_stack(name: str, **overrides) -> cdk.Stack:
    stack = cdk.Stack(cdk.App(), name)
    endpoint = build_endpoint(stack, **overrides)
    for adapter in ("support-en-v1", "support-de-v1"):
        endpoint.add_adapter(adapter, artifact=AdapterArtifact.from_s3_url(URL.format(adapter)))
    return stack


CONFIGURATIONS = {
    "nvme-default": {},
    "ebs-with-created-key": {"instances": Instances(instance_type="ml.p3.2xlarge", volume_size_in_gb=300)},
    "scale-out": {"instances": Instances(instance_type="ml.g6.12xlarge", initial_count=2, min_count=1, max_count=4)},
}


@pytest.mark.parametrize("configuration", sorted(CONFIGURATIONS))
def test_three_nag_packs_find_nothing_unacknowledged(configuration):
    stack = endpoint_stack("Nag-" + configuration, **CONFIGURATIONS[configuration])
    assert nag_violations(stack) == []


def test_nag_vpc_configuration_is_clean_for_the_endpoint():
    stack = cdk.Stack(cdk.App(), "Nag-Vpc")
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-12345678",
        availability_zones=["us-east-1a", "us-east-1b"],
        private_subnet_ids=["subnet-aaaa1111", "subnet-bbbb2222"],
    )
    endpoint = build_endpoint(stack, networking=Networking(vpc=vpc))
    endpoint.add_adapter("tenant-a-v1", artifact=AdapterArtifact.from_s3_url(URL.format("tenant-a-v1")))
    assert nag_violations(stack) == []


def test_acknowledgments_only_cover_what_was_found(monkeypatch):
    """Built with its acknowledgments withheld, the stack shows exactly the findings they name, on the
    constructs they are attached to: none acknowledges something that was never found."""
    withheld: set[tuple[str, str]] = set()
    monkeypatch.setattr(
        nag_acknowledgments,
        "acknowledge",
        lambda construct, acknowledgments: withheld.update((a.id, construct.node.path) for a in acknowledgments),
    )
    stack = endpoint_stack("Nag-Ack-Withheld")
    found = {
        (violation.rule_name, resource.construct_path)
        for pack in (AwsSolutionsChecks(), HIPAASecurityChecks(), NIST80053R5Checks())
        for violation in pack.validate_scope(stack).violations
        for resource in violation.violating_resources
    }
    assert {rule for rule, _ in withheld} == {rule for rule, _ in found}
    for rule, path in found:
        assert any(rule == r and (path == p or path.startswith(p + "/")) for r, p in withheld), (rule, path)


def test_acknowledgments_are_specific_and_give_reasons():
    stack = endpoint_stack("Nag-Ack")
    acknowledged = {}
    for construct in stack.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                acknowledged.update(entry.data)
    assert acknowledged, "the endpoint acknowledges its known findings"
    ids = {key.split("::", 1)[1] if key.lower().startswith("annotation::") else key for key in acknowledged}
    for rule_id, reason in acknowledged.items():
        assert len(reason) > 60, (rule_id, reason)
    assert not any(rule_id in {"AwsSolutions-IAM5", "AwsSolutions-IAM4"} for rule_id in ids), "no blanket IAM acknowledgments"
    assert "AwsSolutions-IAM5[Resource::*]" in ids
    assert any("log-group:/aws/sagemaker/Endpoints/" in i for i in ids)


def test_flatten_reference_matches_cdk_nag_rendering():
    assert (
        flatten_reference({"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::b/p/*"]]})
        == "arn:<AWS::Partition>:s3:::b/p/*"
    )
    assert flatten_reference({"Fn::GetAtt": ["Bucket83908E77", "Arn"]}) == "<Bucket83908E77.Arn>"
    assert flatten_reference("arn:${AWS::Partition}:x") == "arn:<AWS::Partition>:x"


def synth_to(app: cdk.App) -> list[Path]:
    assembly = app.synth()
    return [Path(assembly.directory) / stack.template_file for stack in assembly.stacks]


def test_cfn_lint_passes_on_every_configuration(tmp_path):
    templates = []
    for configuration, overrides in sorted(CONFIGURATIONS.items()):
        app = cdk.App(outdir=str(tmp_path / configuration))
        endpoint = build_endpoint(cdk.Stack(app, "Lint-" + configuration), **overrides)
        endpoint.add_adapter("tenant-a-v1", artifact=AdapterArtifact.from_s3_url(URL.format("tenant-a-v1")))
        templates += synth_to(app)
    result = cfn_lint(templates)
    assert result.returncode == 0, result.stdout + result.stderr


def test_two_endpoints_in_one_stack_never_clash(tmp_path):
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Two-Endpoints")
    first = build_endpoint(stack, "Chat")
    second = build_endpoint(stack, "Vision")
    for endpoint in (first, second):
        endpoint.add_adapter("tenant-a-v1", artifact=AdapterArtifact.from_s3_url(URL.format("tenant-a-v1")))
    template = Template.from_stack(stack)
    names = [
        r["Properties"]["InferenceComponentName"] for r in template.find_resources("AWS::SageMaker::InferenceComponent").values()
    ]
    assert len(names) == 4 and len(set(names)) == 4
    endpoint_names = [r["Properties"]["EndpointName"] for r in template.find_resources("AWS::SageMaker::Endpoint").values()]
    assert len(set(endpoint_names)) == 2
    parameter_names = [r["Properties"]["Name"] for r in template.find_resources("AWS::SSM::Parameter").values()]
    assert len(set(parameter_names)) == 2
    assert nag_violations(stack) == []
    result = cfn_lint(synth_to(app))
    assert result.returncode == 0, result.stdout + result.stderr


def test_grant_to_a_lambda_function_in_another_stack(tmp_path):
    app = cdk.App(outdir=str(tmp_path))
    serving = cdk.Stack(app, "Serving-Stack")
    endpoint = build_endpoint(serving)
    endpoint.add_adapter("tenant-a-v1", artifact=AdapterArtifact.from_s3_url(URL.format("tenant-a-v1")))
    endpoint.add_adapter("tenant-b-v1", artifact=AdapterArtifact.from_s3_url(URL.format("tenant-b-v1")))
    client_stack = cdk.Stack(app, "Client-Stack")
    function = lambda_.Function(
        client_stack,
        "Caller",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
        environment={"ADAPTER_MAP_PARAMETER": endpoint.discovery_parameter_name},
    )
    endpoint.grant_invoke(function, adapters=["tenant-b-v1"])
    endpoint.grant_read_discovery(function)
    client = Template.from_stack(client_stack)
    statements = [
        s for p in client.find_resources("AWS::IAM::Policy").values() for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    invoke = next(s for s in statements if "sagemaker:InvokeEndpoint" in s["Action"])
    rendered = json.dumps(invoke["Resource"])
    assert f"inference-component/{endpoint.prefix}-tenant-b" in rendered and "tenant-a-v1" not in rendered
    assert f"endpoint/{endpoint.endpoint_name}" in rendered
    discovery = next(s for s in statements if s["Action"] == "ssm:GetParameter")
    assert f"parameter/cdk-adapters/{endpoint.prefix}/inference-components" in json.dumps(discovery["Resource"])
    assert "Fn::ImportValue" not in json.dumps(client.to_json()), "names are literal: no cross-stack exports needed"
    assert nag_violations(serving) == []
    templates = {path.name: path for path in synth_to(app)}
    serving_template, client_template = templates["Serving-Stack.template.json"], templates["Client-Stack.template.json"]
    result = cfn_lint([serving_template])
    assert result.returncode == 0, result.stdout + result.stderr
    # The client stack is stock CDK Lambda; cfn-lint may warn about it (W3005) but must find no error.
    result = cfn_lint([client_template])
    assert result.returncode & CFN_LINT_ERROR == 0, result.stdout + result.stderr


@pytest.mark.parametrize("environment", ["dev", "prod"])
def test_example_app_environments_pass_cfn_lint_and_nag(environment, tmp_path):
    import app as example_app
    from tests.constructs.conftest import app_context

    app = cdk.App(outdir=str(tmp_path), context=app_context(environment))
    stack = example_app.build(app)
    assert nag_violations(stack) == []
    result = cfn_lint(synth_to(app))  # synth also runs the app's registered nag packs; a finding would raise
    assert result.returncode == 0, result.stdout + result.stderr
