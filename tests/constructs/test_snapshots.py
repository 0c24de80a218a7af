"""Template snapshots of the example app, one per environment (syrupy).

The serving image is an asset built from this repository, so its hash follows any change under
the build context; it is replaced by a placeholder here and its determinism is checked apart.
"""

from __future__ import annotations

import json
import re

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

import app as example_app
from tests.constructs.conftest import app_context, app_environments

ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def synth_environment(name: str) -> dict:
    return synth_environment_with_shards(name)["stack"]


def synth_environment_with_shards(name: str) -> dict:
    """The stack's template and, by construct path, each nested shard's template."""
    app = cdk.App(context=app_context(name))
    stack = example_app.build(app)
    shards = {shard.node.path: Template.from_stack(shard).to_json() for shard in stack.endpoint.fleet.shards.values()}
    return {"stack": Template.from_stack(stack).to_json(), "shards": shards}


@pytest.mark.parametrize("environment", sorted(app_environments()))
def test_environment_template_snapshot(environment, snapshot):
    templates = synth_environment_with_shards(environment)
    normalized = json.loads(ASSET_HASH.sub("<asset-hash>", json.dumps(templates, sort_keys=True)))
    assert normalized == snapshot


def test_environments_differ_in_size_and_scaling():
    variants = {}
    for name in ("dev", "prod"):
        config = next(r for r in synth_environment(name)["Resources"].values() if r["Type"] == "AWS::SageMaker::EndpointConfig")
        variants[name] = config["Properties"]["ProductionVariants"][0]
    assert variants["dev"]["InstanceType"] == "ml.g6.2xlarge" and "InstancePools" not in variants["dev"]
    assert variants["dev"]["ManagedInstanceScaling"] != variants["prod"]["ManagedInstanceScaling"]
    assert variants["prod"]["InitialInstanceCount"] == 2


def base_component(resources) -> dict:
    [base] = [
        r["Properties"]
        for r in resources
        if r["Type"] == "AWS::SageMaker::InferenceComponent"
        and "BaseInferenceComponentName" not in r["Properties"].get("Specification", {})
    ]
    return base


def test_prod_launches_g6_then_g5_and_its_base_component_has_a_specification_per_pool():
    """prod's instance pools (cdk.json says why): the variant names the pools in priority order and
    how long SageMaker waits for capacity, in place of one instance type; the base component has one
    specification per pool with the reservation a copy takes there (one GPU, 24 GiB, each type holding
    one copy), in place of the singular specification. dev keeps one type and the singular form."""
    resources = synth_environment("prod")["Resources"].values()
    [config] = [r["Properties"] for r in resources if r["Type"] == "AWS::SageMaker::EndpointConfig"]
    [variant] = config["ProductionVariants"]
    assert "InstanceType" not in variant
    assert variant["InstancePools"] == [
        {"InstanceType": "ml.g6.2xlarge", "Priority": 1},
        {"InstanceType": "ml.g5.2xlarge", "Priority": 2},
    ]
    assert variant["VariantInstanceProvisionTimeoutInSeconds"] == 900
    assert variant["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": 2, "MaxInstanceCount": 8}
    base = base_component(resources)
    assert "Specification" not in base
    assert [spec["InstanceType"] for spec in base["Specifications"]] == ["ml.g6.2xlarge", "ml.g5.2xlarge"]
    for spec in base["Specifications"]:
        assert spec["ComputeResourceRequirements"] == {"MinMemoryRequiredInMb": 24576, "NumberOfAcceleratorDevicesRequired": 1}
        assert spec["StartupParameters"] == {
            "ModelDataDownloadTimeoutInSeconds": 1200,
            "ContainerStartupHealthCheckTimeoutInSeconds": 1200,
        }
    assert "instance_pools" in app_environments()["prod"]["reasons"]
    dev = base_component(synth_environment("dev")["Resources"].values())
    assert "Specifications" not in dev and "InstanceType" not in dev["Specification"]


def test_serving_image_asset_hash_is_deterministic():
    def image_of(template: dict) -> str:
        model = next(r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Model")
        return json.dumps(model["Properties"]["PrimaryContainer"]["Image"])

    first, second = image_of(synth_environment("dev")), image_of(synth_environment("dev"))
    assert ASSET_HASH.search(first) and first == second


@pytest.mark.parametrize("environment", sorted(app_environments()))
def test_the_record_publishes_the_manifests_serving_reference(environment):
    """The one change the serving reference made to the templates: the discovery parameter's value
    gained the optional ``serving`` key (the manifest's base facts, rank limit, vision flag and
    adapter locations), and it stays within SSM's Standard tier."""
    from cdk_adapters.contract.discovery import DiscoveryRecord
    from cdk_adapters.endpoint.serving_reference import gate_reference

    app = cdk.App(context=app_context(environment))
    stack = example_app.build(app)
    [parameter] = [r for r in Template.from_stack(stack).to_json()["Resources"].values() if r["Type"] == "AWS::SSM::Parameter"]
    value = parameter["Properties"]["Value"]
    record = DiscoveryRecord.from_json(value)
    assert gate_reference(record.serving) == stack.endpoint.compatibility_reference
    assert record.serving.base_model.model_id == "meta-llama/Llama-3.1-8B-Instruct"
    assert record.serving.adapter_locations == ("s3://example-ml-adapters/adapters/",)
    assert len(value) < 4096 and parameter["Properties"]["Tier"] == "Standard"


def test_prod_spreads_copies_across_zones_and_caches_model_data_and_dev_does_not():
    """cdk.json's prod sets copy placement and data cache (with its reasons); both environments
    state detailed observability off, since the container's EMF metrics carry the per-adapter figures."""
    for name, placed in (("dev", False), ("prod", True)):
        resources = synth_environment(name)["Resources"].values()
        [config] = [r["Properties"] for r in resources if r["Type"] == "AWS::SageMaker::EndpointConfig"]
        assert config["MetricsConfig"] == {"EnableDetailedObservability": False}
        component = base_component(resources)
        specifications = component.get("Specifications") or [component["Specification"]]  # prod: one per pool
        for base in specifications:
            if placed:
                assert base["SchedulingConfig"] == {
                    "PlacementStrategy": "SPREAD",
                    "AvailabilityZoneBalance": {"EnforcementMode": "PERMISSIVE", "MaxImbalance": 0},
                }
                assert base["DataCacheConfig"] == {"EnableCaching": True}
            else:
                assert "SchedulingConfig" not in base and "DataCacheConfig" not in base
    reasons = app_environments()["prod"]["reasons"]
    assert {"copy_placement", "data_cache"} <= set(reasons) and all(len(reason) > 60 for reason in reasons.values())


def test_prod_checks_every_new_or_changed_adapter_after_each_deploy_and_dev_does_not():
    """cdk.json's prod turns the deploy check on (with its reason): one custom resource listing the
    manifest's adapters, after every shard that holds them."""
    from cdk_adapters.deploy_check.deploy_check import RESOURCE_TYPE

    for name, checked in (("dev", False), ("prod", True)):
        resources = synth_environment(name)["Resources"]
        checks = [r for r in resources.values() if r["Type"] == RESOURCE_TYPE]
        if not checked:
            assert checks == []
            continue
        [check] = checks
        assert sorted(check["Properties"]["Adapters"]) == ["support-de-v1", "support-en-v1"]
        shards = {k for k, r in resources.items() if r["Type"] == "AWS::CloudFormation::Stack"}
        assert shards and shards <= set(check["DependsOn"])
    assert len(app_environments()["prod"]["reasons"]["deploy_check"]) > 60
