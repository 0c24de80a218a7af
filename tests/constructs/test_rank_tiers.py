"""Rank tiers: one endpoint, several base components of one model, each adapter on the smallest
tier that holds its rank (issue: mixed ranks without everyone paying for the largest)."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from cdk_adapters import AdapterArtifact, BaseCopies, DeployCheck, FleetPlacement, Instances, RankTier, RollingUpdate, VllmOptions
from cdk_adapters.artifacts.packaging import package_adapter
from cdk_adapters.contract.discovery import DiscoveryRecord, ServingReference
from cdk_adapters.endpoint.imported import ImportedMultiAdapterEndpoint
from cdk_adapters.endpoint.names import validate_adapter_name
from cdk_adapters.hosting.logs import EndpointLogs
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import build_endpoint, new_stack
from tests.constructs.test_nag_lint_composition import cfn_lint, nag_violations, synth_to
from tests.support.synth_refusal import refused_at_synth

URL = "s3://example-adapters/{}/adapter.tar.gz"
BIG = Instances(instance_type="ml.g6.12xlarge")
"""Four GPUs: room for a copy of each tier."""


def tenant_import(record: DiscoveryRecord, stack: cdk.Stack) -> ImportedMultiAdapterEndpoint:
    """A tenant stack's import of the platform's endpoint, from its published record."""
    return ImportedMultiAdapterEndpoint.from_endpoint_attributes(
        stack,
        "Serving",
        endpoint_name=record.endpoint_name,
        base_component_name=record.base_inference_component_name,
        component_prefix=record.component_prefix,
        serving_reference=record.serving,
    )


def published(name: str):
    return AdapterArtifact.from_s3_url(URL.format(name))


def components(template: Template) -> dict[str, dict]:
    """Inference component name -> its properties."""
    return {
        r["Properties"]["InferenceComponentName"]: r
        for r in template.find_resources("AWS::SageMaker::InferenceComponent").values()
    }


def models(template: Template) -> list[dict]:
    return [r["Properties"]["PrimaryContainer"]["Environment"] for r in template.find_resources("AWS::SageMaker::Model").values()]


ONE_TIER_ABOVE = (RankTier(max_lora_rank=64, max_loras=2),)


def tiered(stack: cdk.Stack | None = None, tiers=ONE_TIER_ABOVE, **overrides):
    stack = stack or new_stack()
    endpoint = build_endpoint(stack, rank_tiers=list(tiers), instances=BIG, **overrides)
    endpoint.add_adapter("small-v1", artifact=published("small-v1"), rank=8)
    endpoint.add_adapter("edge-v1", artifact=published("edge-v1"), rank=16)
    endpoint.add_adapter("big-v1", artifact=published("big-v1"), rank=64)
    return endpoint


@pytest.fixture(scope="module")
def two_tiers(tmp_path_factory):
    """One synthesized two-tier endpoint with a deploy check and a rolling update, shared by the module."""
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("tiers")))
    stack = cdk.Stack(app, "Tiers")
    endpoint = tiered(
        stack,
        tiers=[RankTier(max_lora_rank=64, max_loras=2, copy_count=2)],
        deploy_check=DeployCheck(),
        deployment=RollingUpdate(),
        base_copies=BaseCopies(count=2),
    )
    return endpoint, Template.from_stack(stack), app


def test_each_tier_is_a_base_component_with_its_own_model_rank_and_slots(two_tiers):
    endpoint, template, _ = two_tiers
    found = components(template)
    first, second = endpoint.base_component_name, f"{endpoint.prefix}-base-r64"
    assert set(found) == {first, second} | {f"{endpoint.prefix}-{a}" for a in ("small-v1", "edge-v1", "big-v1")}
    environments = sorted(models(template), key=lambda env: int(env["CDK_ADAPTERS_VLLM_MAX_LORA_RANK"]))
    assert [env["CDK_ADAPTERS_VLLM_MAX_LORA_RANK"] for env in environments] == ["16", "64"]
    assert [env["CDK_ADAPTERS_VLLM_MAX_LORAS"] for env in environments] == ["4", "2"]
    # Apart from the engine's LoRA slots, both containers run the same configuration.
    strip = {"CDK_ADAPTERS_VLLM_MAX_LORA_RANK", "CDK_ADAPTERS_VLLM_MAX_LORAS"}
    smaller, larger = ({k: v for k, v in env.items() if k not in strip} for env in environments)
    assert smaller == larger
    tier = found[second]
    assert tier["Properties"]["Specification"]["ModelName"] != found[first]["Properties"]["Specification"]["ModelName"]
    assert tier["Properties"]["RuntimeConfig"] == {"CopyCount": 2}
    assert "DeploymentConfig" in tier["Properties"] and "DeploymentConfig" in found[first]["Properties"]


def test_adapters_attach_to_the_smallest_tier_holding_their_rank(two_tiers):
    endpoint, template, _ = two_tiers
    found = components(template)

    def base_of(adapter: str) -> str:
        return found[f"{endpoint.prefix}-{adapter}"]["Properties"]["Specification"]["BaseInferenceComponentName"]

    assert base_of("small-v1") == base_of("edge-v1") == endpoint.base_component_name
    assert base_of("big-v1") == f"{endpoint.prefix}-base-r64"
    stack = cdk.Stack.of(endpoint)
    tier_base = stack.get_logical_id(endpoint.rank_tiers[0].base_component.resource)
    first_base = stack.get_logical_id(endpoint.base_component.resource)
    big, small = (found[f"{endpoint.prefix}-{adapter}"]["DependsOn"] for adapter in ("big-v1", "small-v1"))
    assert tier_base in big and first_base not in big, "CloudFormation deletes an adapter before the base it is on"
    assert first_base in small and tier_base not in small


def test_each_tier_logs_to_its_own_group_the_role_may_write(two_tiers):
    endpoint, template, _ = two_tiers
    groups = [r["Properties"]["LogGroupName"] for r in template.find_resources("AWS::Logs::LogGroup").values()]
    tier_group = f"/aws/sagemaker/InferenceComponents/{endpoint.prefix}-base-r64"
    assert tier_group in groups
    statements = [
        s
        for p in template.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "WriteTierLogs"
    ]
    assert len(statements) == 1 and tier_group in json.dumps(statements[0]["Resource"])


def test_the_deploy_check_never_invokes_any_tier_base(two_tiers):
    endpoint, template, _ = two_tiers
    [deny] = [
        s
        for p in template.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "NeverTheBaseComponent"
    ]
    text = json.dumps(deny["Resource"])
    assert f'inference-component/{endpoint.base_component_name}"' in text
    assert f"inference-component/{endpoint.prefix}-base-r64" in text


def test_the_dashboard_draws_every_tier(two_tiers):
    endpoint, template, _ = two_tiers
    [dashboard] = template.find_resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "rank-64 tier" in body and f"{endpoint.prefix}-base-r64" in body


def test_the_discovery_record_names_the_tiers_and_round_trips(two_tiers):
    endpoint, _, _ = two_tiers
    record = endpoint.discovery_record()
    serving = record.serving
    assert serving.max_lora_rank == 16, "a reader that knows no tiers checks against the first tier and refuses larger ranks"
    assert serving.tiers == ((16, endpoint.base_component_name), (64, f"{endpoint.prefix}-base-r64"))
    assert DiscoveryRecord.from_json(record.to_json()) == record
    assert len(record.to_json()) < 4096


def test_nag_and_cfn_lint_pass_with_tiers(two_tiers):
    endpoint, _, app = two_tiers
    assert nag_violations(cdk.Stack.of(endpoint)) == []
    result = cfn_lint(synth_to(app))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_order_tiers_are_given_in_changes_nothing():
    one = Template.from_stack(cdk.Stack.of(tiered(tiers=[RankTier(max_lora_rank=64), RankTier(max_lora_rank=128)]))).to_json()
    two = Template.from_stack(cdk.Stack.of(tiered(tiers=[RankTier(max_lora_rank=128), RankTier(max_lora_rank=64)]))).to_json()
    assert one == two


def test_one_tier_is_the_endpoint_as_before():
    plain = build_endpoint(new_stack())
    empty = build_endpoint(new_stack(), rank_tiers=[])
    for endpoint in (plain, empty):
        endpoint.add_adapter("small-v1", artifact=published("small-v1"))
    assert Template.from_stack(cdk.Stack.of(plain)).to_json() == Template.from_stack(cdk.Stack.of(empty)).to_json()
    assert plain.discovery_record().serving.tiers == ()
    assert "tiers" not in plain.discovery_record().serving.to_document()


def test_synth_refuses_an_adapter_no_tier_holds_naming_it_its_rank_and_the_tiers():
    endpoint = tiered()
    with pytest.raises(ConfigurationError) as caught:
        endpoint.add_adapter("huge-v1", artifact=published("huge-v1"), rank=128)
    assert "adapter 'huge-v1' has rank 128, above every tier's max_lora_rank (16, 64)" in str(caught.value)
    with pytest.raises(ConfigurationError, match=r"rank: is needed to choose its tier \(16, 64\)"):
        endpoint.add_adapter("unknown-v1", artifact=published("unknown-v1"))
    with pytest.raises(ConfigurationError, match="must be a positive integer"):
        endpoint.add_adapter("odd-v1", artifact=published("odd-v1"), rank=0)
    assert set(endpoint.adapters) == {"small-v1", "edge-v1", "big-v1"}, "a refused adapter adds nothing"
    one_tier = build_endpoint(new_stack())
    with pytest.raises(ConfigurationError, match=r"rank 32, above every tier's max_lora_rank \(16\)"):
        one_tier.add_adapter("big-v1", artifact=published("big-v1"), rank=32)


def test_a_local_archive_states_its_own_rank(zoo, tmp_path):
    endpoint = build_endpoint(new_stack(), rank_tiers=[RankTier(max_lora_rank=64)], instances=BIG)
    archive = package_adapter(zoo.copy("rank-32", tmp_path / "r32"), tmp_path / "r32.tar.gz").path
    component = endpoint.add_adapter("local-v1", artifact=AdapterArtifact.from_archive(archive))
    spec = cdk.Stack.of(endpoint).resolve(component.resource.specification)
    assert spec["baseInferenceComponentName"] == f"{endpoint.prefix}-base-r64"
    with pytest.raises(ConfigurationError, match="is 16, but the archive's adapter has rank 32"):
        endpoint.add_adapter("understated-v1", artifact=AdapterArtifact.from_archive(archive), rank=16)


def test_tier_props_are_checked_all_at_once():
    with pytest.raises(ConfigurationError) as caught:
        build_endpoint(
            new_stack(),
            vllm=VllmOptions(max_lora_rank=32),
            rank_tiers=[
                RankTier(max_lora_rank=16),
                RankTier(max_lora_rank=48),
                RankTier(max_lora_rank=64, copy_count=0),
                RankTier(max_lora_rank=64, max_loras=8, max_cpu_loras=4),
                "rank 128",
            ],
        )
    message = str(caught.value)
    assert "rank_tiers[0].max_lora_rank: (16) must be above the first tier's, vllm.max_lora_rank (32)" in message
    assert "rank_tiers[1].max_lora_rank: vLLM accepts only" in message
    assert "rank_tiers[2].copy_count: must be a positive integer" in message
    assert "rank_tiers[3].max_lora_rank: (64) is another tier's rank already" in message
    assert "rank_tiers[3].max_cpu_loras: (4) must be >= max_loras (8)" in message
    assert "rank_tiers[4]: must be a RankTier, got str" in message
    with pytest.raises(ConfigurationError, match=r"rank_tiers\[0\].copy_count: \(1\), with the endpoint's rolling update"):
        build_endpoint(
            new_stack(), base_copies=BaseCopies(count=2), deployment=RollingUpdate(), rank_tiers=[RankTier(64)], instances=BIG
        )


def test_tiers_whose_copies_do_not_fit_fail_synth_saying_each_loads_the_weights_again():
    endpoint = build_endpoint(new_stack(), rank_tiers=[RankTier(max_lora_rank=64)])  # one ml.g6.2xlarge: one GPU
    with refused_at_synth("the tiers' copies at creation", "each tier's copy loads the base model's weights again"):
        cdk.App.of(endpoint).synth()
    scaled = build_endpoint(new_stack(), rank_tiers=[RankTier(max_lora_rank=64)], instances=BIG)
    # Four GPUs: the tier alone may reach four copies, but not beside the first tier's copy.
    scaled.rank_tiers[0].base_component.auto_scale_copy_count(min_copies=1, max_copies=4).scale_on_invocations(10)
    with refused_at_synth("the tiers' most copies", "instances.max_count"):
        cdk.App.of(scaled).synth()


def test_an_adapter_may_not_be_named_like_a_tier_base():
    assert any("reserved for the base inference component" in p.message for p in validate_adapter_name("base-r64"))
    assert validate_adapter_name("base-rank-v1") == []


def test_encrypted_logs_let_cloudwatch_use_the_key_for_each_tier_group():
    stack = new_stack()
    key = cdk.aws_kms.Key(stack, "LogsKey")
    endpoint = tiered(stack, logs=EndpointLogs(encryption_key=key))
    policy = json.dumps(stack.resolve(key.node.default_child.key_policy))
    assert f"/aws/sagemaker/InferenceComponents/{endpoint.prefix}-base-r64" in policy


def test_a_tenant_import_attaches_by_the_same_rule(tmp_path):
    endpoint = tiered()
    record = DiscoveryRecord.from_json(endpoint.discovery_record().to_json())
    stack = new_stack("Tenant")
    imported = tenant_import(record, stack)
    small = imported.add_adapter("acme-small-v1", artifact=published("acme-small-v1"), rank=16)
    big = imported.add_adapter("acme-big-v1", artifact=published("acme-big-v1"), rank=33)
    bases = [stack.resolve(c.resource.specification)["baseInferenceComponentName"] for c in (small, big)]
    assert bases == [endpoint.base_component_name, f"{endpoint.prefix}-base-r64"]
    with pytest.raises(ConfigurationError, match=r"rank 128, above every tier's max_lora_rank \(16, 64\)"):
        imported.add_adapter("acme-huge-v1", artifact=published("acme-huge-v1"), rank=128)
    with pytest.raises(ConfigurationError, match="is needed to choose its tier"):
        imported.add_adapter("acme-unknown-v1", artifact=published("acme-unknown-v1"))


def test_a_reader_without_tiers_keeps_the_first_tiers_rank_and_bad_tiers_are_named():
    document = {
        "version": 1,
        "max_lora_rank": 16,
        "adapter_locations": [],
        "tiers": [
            {"max_lora_rank": 16, "base_inference_component_name": "p-base"},
            {"max_lora_rank": 64, "base_inference_component_name": "p-base-r64"},
        ],
    }
    reference, problems = ServingReference.from_document(document)
    assert problems == [] and reference.largest_rank == 64 and reference.max_lora_rank == 16
    for tiers in (
        [{"max_lora_rank": 32, "base_inference_component_name": "p-base"}, document["tiers"][1]],
        [document["tiers"][1], document["tiers"][0]],
        "two",
    ):
        _, problems = ServingReference.from_document({**document, "tiers": tiers})
        assert problems and "serving.tiers must be a list" in problems[0]


def test_a_tier_pin_holds_an_adapter_where_it_is():
    endpoint = tiered()
    kept = endpoint.add_adapter("kept-v1", artifact=published("kept-v1"), rank=8, tier=64)
    spec = cdk.Stack.of(endpoint).resolve(kept.resource.specification)
    assert spec["baseInferenceComponentName"] == f"{endpoint.prefix}-base-r64"
    with pytest.raises(ConfigurationError, match=r"tier: \(32\) is none of the tiers' max_lora_rank \(16, 64\)"):
        endpoint.add_adapter("nowhere-v1", artifact=published("nowhere-v1"), rank=8, tier=32)
    with pytest.raises(ConfigurationError, match=r"has rank 64, above the pinned tier \(16\)"):
        endpoint.add_adapter("squeezed-v1", artifact=published("squeezed-v1"), rank=64, tier=16)


def test_a_shard_waits_for_every_tier_base_it_may_hold_adapters_of():
    stack = new_stack()
    endpoint = tiered(stack, placement=FleetPlacement())  # nested shards, as by default
    template = Template.from_stack(stack)
    tier_base = stack.get_logical_id(endpoint.rank_tiers[0].base_component.resource)
    first_base = stack.get_logical_id(endpoint.base_component.resource)
    shards = template.find_resources("AWS::CloudFormation::Stack").values()
    assert shards and all({tier_base, first_base} <= set(shard["DependsOn"]) for shard in shards)


def test_a_move_between_tiers_is_a_change_the_deploy_check_invokes():
    def digest(**where) -> str:
        endpoint = tiered(deploy_check=DeployCheck())
        endpoint.add_adapter("mover-v1", artifact=published("mover-v1"), rank=8, **where)
        return endpoint.deploy_check.adapters["mover-v1"]

    assert digest() != digest(tier=64)
    one_tier = build_endpoint(new_stack(), deploy_check=DeployCheck())
    one_tier.add_adapter("mover-v1", artifact=published("mover-v1"), rank=8)
    assert one_tier.deploy_check.adapters["mover-v1"] == digest(), "the first tier digests as one tier always did"


def test_the_tiers_are_fixed_when_the_endpoint_is_built():
    given = [RankTier(max_lora_rank=64)]
    endpoint = build_endpoint(new_stack(), rank_tiers=given, instances=BIG)
    given.append(RankTier(max_lora_rank=128))
    assert endpoint.tier_ranks == (16, 64)
    with pytest.raises(ConfigurationError, match=r"rank 128, above every tier's max_lora_rank \(16, 64\)"):
        endpoint.add_adapter("big-v1", artifact=published("big-v1"), rank=128)


def test_a_rank_must_be_an_integer_and_a_pin_needs_one_for_a_published_archive():
    with pytest.raises(ConfigurationError, match=r"rank_tiers\[0\].max_lora_rank: vLLM accepts only"):
        build_endpoint(new_stack(), rank_tiers=[RankTier(max_lora_rank=64.0)], instances=BIG)
    with pytest.raises(ConfigurationError, match="rank: is needed to choose its tier"):
        tiered().add_adapter("pinned-v1", artifact=published("pinned-v1"), tier=64)


def test_an_import_of_one_tier_refuses_a_rank_above_it():
    record = DiscoveryRecord.from_json(build_endpoint(new_stack()).discovery_record().to_json())
    imported = tenant_import(record, new_stack("Tenant"))
    with pytest.raises(ConfigurationError, match=r"rank 128, above every tier's max_lora_rank \(16\)"):
        imported.add_adapter("acme-big-v1", artifact=published("acme-big-v1"), rank=128)
    small = imported.add_adapter("acme-small-v1", artifact=published("acme-small-v1"), rank=16)
    assert (
        cdk.Stack.of(small).resolve(small.resource.specification)["baseInferenceComponentName"]
        == record.base_inference_component_name
    )


def test_an_imports_deploy_check_added_after_its_adapters_still_sees_their_tier():
    endpoint = tiered()
    record = DiscoveryRecord.from_json(endpoint.discovery_record().to_json())

    def digest(rank: int) -> str:
        imported = tenant_import(record, new_stack("Tenant"))
        imported.add_adapter("acme-v1", artifact=published("acme-v1"), rank=rank)
        return imported.add_deploy_check().adapters["acme-v1"]

    assert digest(64) != digest(8)


def test_a_rank_no_tier_holds_has_no_base_and_the_first_rank_must_be_an_integer():
    with pytest.raises(ConfigurationError, match="128 is above every tier's max_lora_rank"):
        tiered().tier_base(128)
    with pytest.raises(ConfigurationError, match=r"vllm\.max_lora_rank: vLLM accepts only"):
        build_endpoint(new_stack(), vllm=VllmOptions(max_lora_rank=16.0))


def test_the_serving_container_launches_each_tier_with_its_own_rank_and_slots(two_tiers, tmp_path):
    """Each tier model's environment, as CloudFormation renders it, through the container's own launcher."""
    from adapter_server.launch import resolve_launch
    from tests.constructs.conftest import deployed

    _, template, _ = two_tiers
    launched = {}
    for model in template.find_resources("AWS::SageMaker::Model").values():
        environment = {name: deployed(value) for name, value in model["Properties"]["PrimaryContainer"]["Environment"].items()}
        command = list(resolve_launch(environment, python="python", no_custom_code_dir=tmp_path, model_dir=tmp_path).command)
        rank = command[command.index("--max-lora-rank") + 1]
        launched[rank] = command[command.index("--max-loras") + 1]
    assert launched == {"16": "4", "64": "2"}
