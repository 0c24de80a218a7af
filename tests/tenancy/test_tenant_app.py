"""A tenant team's own CDK app adds adapters to the platform team's endpoint.

Two separate `App`s share no construct: the platform's app deploys the endpoint and publishes its
discovery record (with the serving reference); the tenant's app imports the endpoint by plain
attributes or by a cached context lookup of that record, adds real PEFT archives, grants a role,
and is refused at its own synth when an adapter does not fit the platform's serving reference.
"""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from cdk_adapters import BaseModelIdentity
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.artifacts.packaging import package_adapter
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from cdk_adapters.endpoint.imported import ImportedMultiAdapterEndpoint
from cdk_adapters.endpoint.interface import IMultiAdapterEndpoint
from cdk_adapters.endpoint.serving_reference import gate_reference
from cdk_adapters.gate import check_adapter_archive
from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.private import nag_acknowledgments as nag
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import ADAPTER_BUCKET_URL, build_endpoint, real_archives
from tests.constructs.test_nag_lint_composition import cfn_lint, nag_violations
from tests.support.tiny_models import TINY_BASE_MODEL_ID, TINY_BASE_REVISION

ENV = cdk.Environment(account="123456789012", region="us-east-1")
ROLE_ARN = "arn:aws:iam::123456789012:role/platform-endpoint-role"


def platform_app(zoo, outdir: Path) -> tuple[cdk.App, MultiAdapterEndpoint]:
    """The platform team's app: the endpoint, its base facts, one adapter of its own and an alias."""
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "Platform", env=ENV)
    endpoint = build_endpoint(
        stack,
        vllm=VllmOptions(max_lora_rank=16),
        base_model=BaseModelIdentity(facts=zoo.base_facts, model_id=TINY_BASE_MODEL_ID, revision=TINY_BASE_REVISION),
    )
    endpoint.add_adapter("platform-v1", artifact=AdapterArtifact.from_s3_url(f"{ADAPTER_BUCKET_URL}platform-v1/adapter.tar.gz"))
    endpoint.add_alias("platform", "platform-v1")
    return app, endpoint


def synth_templates(app: cdk.App) -> dict[str, dict]:
    assembly = app.synth()
    return {
        stack.stack_name: json.loads((Path(assembly.directory) / stack.template_file).read_text()) for stack in assembly.stacks
    }


def published_record(template: dict) -> str:
    [parameter] = [r for r in template["Resources"].values() if r["Type"] == "AWS::SSM::Parameter"]
    value = parameter["Properties"]["Value"]
    assert isinstance(value, str), "the record is a literal: every name in it is known at synth"
    return value


@pytest.fixture
def platform(zoo, tmp_path):
    app, endpoint = platform_app(zoo, tmp_path / "platform.out")
    templates = synth_templates(app)
    return endpoint, templates, published_record(templates["Platform"])


def tenant_stack(app: cdk.App) -> cdk.Stack:
    return cdk.Stack(app, "Tenant-Acme", env=ENV)


def lookup_key(tenant_app_outdir: Path, parameter_name: str) -> str:
    """The context key a first, uncached synth reports missing (as the CLI would look it up)."""
    app = cdk.App(outdir=str(tenant_app_outdir))
    imported = MultiAdapterEndpoint.from_discovery_parameter(tenant_stack(app), "Serving", parameter_name=parameter_name)
    assert imported.lookup_pending and imported.endpoint_name == "lookup-pending"
    manifest = json.loads((Path(app.synth().directory) / "manifest.json").read_text())
    [entry] = [m for m in manifest.get("missing", []) if m["provider"] == "ssm"]
    assert entry["props"]["parameterName"] == parameter_name
    return entry["key"]


def add_tenant_adapters(imported, archives: list[Path], *, aliases_known: bool = True) -> iam.Role:
    """`aliases_known`: the import read the record, so it may grant the platform's alias too; an
    import by attributes knows no alias and grants its own adapters (the default)."""
    for name, archive in zip(("acme-chat-v1", "acme-search-v1"), archives):
        imported.add_adapter(name, artifact=AdapterArtifact.from_archive(archive))
    role = iam.Role(imported.node.scope, "Caller", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    if aliases_known:
        imported.grant_invoke(role, adapters=["acme-chat-v1", "acme-search-v1", "platform"])
    else:
        imported.grant_invoke(role)
    imported.grant_read_discovery(role)
    # The caller's own role: CDK grants go to its default (inline) policy, as for any CDK grant; the
    # tenant acknowledges that, so what the three nag packs see beyond it is the import's alone.
    nag.acknowledge_inline_policy(
        role.node.find_child("DefaultPolicy"), "the tenant's caller role: CDK grants land in its default policy"
    )
    return role


def check_tenant_template(template: dict, endpoint: MultiAdapterEndpoint, *, aliases_known: bool = True) -> None:
    """`aliases_known`: the import read the record (a lookup), so the alias grants its target; an
    import by attributes knows no alias and grants its own adapters only."""
    components = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::InferenceComponent"]
    assert sorted(r["Properties"]["InferenceComponentName"] for r in components) == [
        f"{endpoint.prefix}-acme-chat-v1",
        f"{endpoint.prefix}-acme-search-v1",
    ]
    for resource in components:
        spec = resource["Properties"]["Specification"]
        assert resource["Properties"]["EndpointName"] == endpoint.endpoint_name
        assert spec["BaseInferenceComponentName"] == endpoint.base_component_name
        assert any("LocalArchivePolicy" in dependency for dependency in resource["DependsOn"]), "the role may read it first"
    [archive_policy] = [
        p
        for p in template["Resources"].values()
        if p["Type"] == "AWS::IAM::Policy"
        and p["Properties"]["PolicyDocument"]["Statement"][0].get("Sid") == "ReadTenantAdapterArchives"
    ]
    assert archive_policy["Properties"]["Roles"] == ["platform-endpoint-role"]
    statements = [
        s
        for p in template["Resources"].values()
        if p["Type"] == "AWS::IAM::Policy"
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    invoke = json.dumps(next(s for s in statements if "sagemaker:InvokeEndpoint" in s["Action"])["Resource"])
    for name in ("acme-chat-v1", "acme-search-v1") + (("platform-v1",) if aliases_known else ()):
        assert f"inference-component/{endpoint.prefix}-{name}" in invoke
    if not aliases_known:
        assert f"{endpoint.prefix}-platform" not in invoke
    assert f"endpoint/{endpoint.endpoint_name}" in invoke and "-*" not in invoke
    assert "Fn::ImportValue" not in json.dumps(template)


def test_the_platform_publishes_its_serving_reference(platform, zoo):
    endpoint, _, text = platform
    record = DiscoveryRecord.from_json(text)
    assert record == endpoint.discovery_record()
    assert gate_reference(record.serving) == endpoint.compatibility_reference
    assert record.serving.adapter_locations == (ADAPTER_BUCKET_URL,)
    assert record.serving.max_lora_rank == 16 and record.serving.base_model.model_id == TINY_BASE_MODEL_ID
    assert len(text) < 4096, "Standard tier"


def test_a_tenant_app_imports_by_cached_lookup_adds_adapters_and_grants(platform, zoo, tmp_path):
    endpoint, _platform_templates, text = platform
    key = lookup_key(tmp_path / "first-pass", endpoint.discovery_parameter_name)
    app = cdk.App(outdir=str(tmp_path / "tenant.out"), context={key: text})
    stack = tenant_stack(app)
    imported = MultiAdapterEndpoint.from_discovery_parameter(
        stack, "Serving", parameter_name=endpoint.discovery_parameter_name, execution_role_arn=ROLE_ARN
    )
    assert not imported.lookup_pending and imported.record == DiscoveryRecord.from_json(text)
    assert isinstance(imported, IMultiAdapterEndpoint) and isinstance(endpoint, IMultiAdapterEndpoint)
    assert (imported.endpoint_name, imported.base_component_name, imported.component_prefix) == (
        endpoint.endpoint_name,
        endpoint.base_component_name,
        endpoint.component_prefix,
    )
    add_tenant_adapters(imported, real_archives(zoo, tmp_path, 2))
    assert nag_violations(stack) == []
    templates = synth_templates(app)
    manifest = json.loads((tmp_path / "tenant.out" / "manifest.json").read_text())
    assert "missing" not in manifest, "the context answered the lookup"
    check_tenant_template(templates["Tenant-Acme"], endpoint)
    result = cfn_lint([tmp_path / "tenant.out" / "Tenant-Acme.template.json"])
    assert result.returncode == 0, result.stdout + result.stderr
    metric = imported.metric("Invocations", adapter="acme-chat-v1")
    assert metric.dimensions == {"InferenceComponentName": f"{endpoint.prefix}-acme-chat-v1"}


def test_a_tenant_app_imports_by_plain_attributes(platform, zoo, tmp_path):
    endpoint, _, text = platform
    app = cdk.App(outdir=str(tmp_path / "tenant.out"))
    stack = cdk.Stack(app, "Tenant-Acme")  # no account needed
    imported = MultiAdapterEndpoint.from_endpoint_attributes(
        stack,
        "Serving",
        endpoint_name=endpoint.endpoint_name,
        base_component_name=endpoint.base_component_name,
        component_prefix=endpoint.component_prefix,
        discovery_parameter_name=endpoint.discovery_parameter_name,
        serving_reference=DiscoveryRecord.from_json(text).serving,
        execution_role_arn=ROLE_ARN,
    )
    add_tenant_adapters(imported, real_archives(zoo, tmp_path, 2), aliases_known=False)
    assert nag_violations(stack) == []
    check_tenant_template(synth_templates(app)["Tenant-Acme"], endpoint, aliases_known=False)
    result = cfn_lint([tmp_path / "tenant.out" / "Tenant-Acme.template.json"])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("kind", "field", "rule"), [("rank-64", "r", "rank-limit"), ("dora", "use_dora", "dora")])
def test_a_bad_tenant_adapter_is_refused_at_the_tenants_synth(platform, zoo, tmp_path, kind, field, rule):
    endpoint, _, text = platform
    archive = package_adapter(zoo.adapter(kind), tmp_path / f"{kind}.tar.gz").path
    key = lookup_key(tmp_path / "first-pass", endpoint.discovery_parameter_name)
    app = cdk.App(context={key: text})
    imported = ImportedMultiAdapterEndpoint.from_discovery_parameter(
        tenant_stack(app), "Serving", parameter_name=endpoint.discovery_parameter_name, execution_role_arn=ROLE_ARN
    )
    with pytest.raises(ConfigurationError) as caught:
        imported.add_adapter("acme-chat-v1", artifact=AdapterArtifact.from_archive(archive))
    assert [(p.subject, p.field, p.rule) for p in caught.value.problems] == [("adapter 'acme-chat-v1'", field, rule)]
    assert "imported MultiAdapterEndpoint 'Tenant-Acme/Serving'" in str(caught.value)
    # The platform's own gate says exactly the same about it.
    assert list(caught.value.problems) == check_adapter_archive("acme-chat-v1", archive, endpoint.compatibility_reference)
    assert imported.adapters == {}


def test_the_platforms_templates_are_the_same_with_and_without_a_tenant_app(zoo, tmp_path):
    alone, _ = platform_app(zoo, tmp_path / "alone")
    without = synth_templates(alone)
    beside, endpoint = platform_app(zoo, tmp_path / "beside")
    tenant = cdk.App(outdir=str(tmp_path / "tenant"))
    imported = MultiAdapterEndpoint.from_endpoint_attributes(
        tenant_stack(tenant),
        "Serving",
        endpoint_name=endpoint.endpoint_name,
        base_component_name=endpoint.base_component_name,
        component_prefix=endpoint.component_prefix,
        discovery_parameter_name=endpoint.discovery_parameter_name,
        serving_reference=endpoint.discovery_record().serving,
        execution_role_arn=ROLE_ARN,
    )
    add_tenant_adapters(imported, real_archives(zoo, tmp_path, 2), aliases_known=False)
    synth_templates(tenant)
    with_tenant = synth_templates(beside)
    assert json.dumps(with_tenant, sort_keys=True) == json.dumps(without, sort_keys=True)


def test_what_an_import_refuses(platform, tmp_path):
    endpoint, _, text = platform
    stack = cdk.Stack(cdk.App(), "Tenant")
    bare = MultiAdapterEndpoint.from_endpoint_attributes(
        stack,
        "Bare",
        endpoint_name=endpoint.endpoint_name,
        base_component_name=endpoint.base_component_name,
        component_prefix=endpoint.component_prefix,
    )
    with pytest.raises(ConfigurationError) as caught:
        bare.add_adapter("acme-v1", artifact=AdapterArtifact.from_s3_url("s3://elsewhere/acme-v1/adapter.tar.gz"))
    assert "outside every adapter location of the endpoint (declared: none)" in str(caught.value)
    with pytest.raises(ConfigurationError, match="discovery_parameter_name: is not known"):
        bare.grant_read_discovery(iam.Role(stack, "R", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com")))
    served = MultiAdapterEndpoint.from_endpoint_attributes(
        stack,
        "Served",
        endpoint_name=endpoint.endpoint_name,
        base_component_name=endpoint.base_component_name,
        component_prefix=endpoint.component_prefix,
        serving_reference=DiscoveryRecord.from_json(text).serving,
    )
    served.add_adapter("acme-v1", artifact=AdapterArtifact.from_s3_url(f"{ADAPTER_BUCKET_URL}acme-v1/adapter.tar.gz"))
    with pytest.raises(ConfigurationError) as caught:
        served.add_adapter("acme", artifact=AdapterArtifact.from_s3_url(f"{ADAPTER_BUCKET_URL}acme/adapter.tar.gz"))
    assert "[version-suffix]" in str(caught.value)
    with pytest.raises(ConfigurationError, match="needs an explicit env"):
        MultiAdapterEndpoint.from_discovery_parameter(stack, "Lookup", parameter_name=endpoint.discovery_parameter_name)
    with pytest.raises(ConfigurationError) as caught:
        MultiAdapterEndpoint.from_endpoint_attributes(
            stack, "Wrong", endpoint_name="a b", base_component_name="", component_prefix="p"
        )
    assert "endpoint_name" in str(caught.value) and "base_component_name" in str(caught.value)


def test_a_grant_follows_the_records_canary_and_a_bad_cached_value_is_named(tmp_path):
    from cdk_adapters.contract.discovery import CanaryRecord

    canary = CanaryRecord("canary-1a2b3c4d", "canary-1a2b3c4d-base", "canary-1a2b3c4d", ("platform-v1",), 10)
    record = DiscoveryRecord(
        "main-1a2b3c4d", "main-1a2b3c4d-base", "main-1a2b3c4d", canary=canary, aliases={"platform": {"platform-v1": 100}}
    )
    stack = cdk.Stack(cdk.App(), "Tenant")
    imported = ImportedMultiAdapterEndpoint(
        stack, "Serving", record=record, adapter_locations=[AdapterLocation.from_s3_url(ADAPTER_BUCKET_URL)]
    )
    imported.add_adapter("acme-v1", artifact=AdapterArtifact.from_s3_url(f"{ADAPTER_BUCKET_URL}acme-v1/adapter.tar.gz"))
    role = iam.Role(stack, "Caller", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    imported.grant_invoke(role, adapters=["platform", "acme-v1"])  # the platform's alias (its target) and this stack's adapter
    [policy] = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    rendered = json.dumps(policy["Properties"]["PolicyDocument"])
    for arn in (
        "endpoint/main-1a2b3c4d",
        "inference-component/main-1a2b3c4d-platform-v1",
        "inference-component/main-1a2b3c4d-acme-v1",
        "endpoint/canary-1a2b3c4d",
        "inference-component/canary-1a2b3c4d-platform-v1",
    ):
        assert arn in rendered
    assert "canary-1a2b3c4d-acme-v1" not in rendered, "the canary serves only its own adapters"

    key = lookup_key(tmp_path / "first-pass", "/cdk-adapters/x/inference-components")
    with pytest.raises(ConfigurationError, match="is not a discovery record this cdk-adapters reads: not JSON"):
        MultiAdapterEndpoint.from_discovery_parameter(
            tenant_stack(cdk.App(context={key: "oops"})), "Serving", parameter_name="/cdk-adapters/x/inference-components"
        )


def test_a_tenant_adapter_attaches_to_the_platforms_rank_tier_through_the_lookup(tmp_path):
    from cdk_adapters import Instances, RankTier

    platform = cdk.App(outdir=str(tmp_path / "platform.out"))
    endpoint = build_endpoint(
        cdk.Stack(platform, "Platform", env=ENV),
        rank_tiers=[RankTier(max_lora_rank=64)],
        instances=Instances(instance_type="ml.g6.12xlarge"),
    )
    endpoint.add_adapter(
        "platform-v1", artifact=AdapterArtifact.from_s3_url(f"{ADAPTER_BUCKET_URL}platform-v1/adapter.tar.gz"), rank=16
    )
    text = published_record(synth_templates(platform)["Platform"])
    big = AdapterArtifact.from_s3_url(f"{ADAPTER_BUCKET_URL}acme-big-v1/adapter.tar.gz")

    first_pass = cdk.App(outdir=str(tmp_path / "first-pass"))
    pending = MultiAdapterEndpoint.from_discovery_parameter(
        tenant_stack(first_pass), "Serving", parameter_name=endpoint.discovery_parameter_name
    )
    pending.add_adapter("acme-big-v1", artifact=big, rank=64)  # no record yet: nothing to refuse it by
    key = lookup_key(tmp_path / "key", endpoint.discovery_parameter_name)

    app = cdk.App(outdir=str(tmp_path / "tenant.out"), context={key: text})
    imported = MultiAdapterEndpoint.from_discovery_parameter(
        tenant_stack(app), "Serving", parameter_name=endpoint.discovery_parameter_name
    )
    imported.add_adapter("acme-big-v1", artifact=big, rank=64)
    with pytest.raises(ConfigurationError, match=r"rank 128, above every tier's max_lora_rank \(16, 64\)"):
        imported.add_adapter("acme-huge-v1", artifact=big, rank=128)
    [component] = [
        r for r in synth_templates(app)["Tenant-Acme"]["Resources"].values() if r["Type"] == "AWS::SageMaker::InferenceComponent"
    ]
    assert component["Properties"]["Specification"]["BaseInferenceComponentName"] == f"{endpoint.prefix}-base-r64"
