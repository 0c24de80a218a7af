"""Turning a hosting option on changes only the resources SageMaker reads it from, through the
real CDK CLI: routing and SageMaker's metrics the endpoint config (replaced, as any change to it is), copy
placement and data cache the base component; never an adapter component (their nested templates
stay byte-for-byte the same)."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest

from cdk_adapters import BaseCopies, Instances
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.endpoint.fleet import FleetPlacement
from cdk_adapters.hosting.capacity_reservation import CapacityReservation
from cdk_adapters.hosting.copy_placement import CopyPlacement
from cdk_adapters.hosting.instance_access import SsmAccess
from cdk_adapters.hosting.routing import Routing
from cdk_adapters.hosting.sagemaker_metrics import Observability
from tests.constructs.conftest import build_endpoint
from tests.support.cdk_diff import diff_assemblies

pytestmark = pytest.mark.cdk_cli

STACK = "Hosting-Diff"
ADAPTERS = ("support-en-v1", "support-de-v1", "billing-v1")


def synth(directory: Path, **options) -> Path:
    app = cdk.App(outdir=str(directory))
    endpoint = build_endpoint(cdk.Stack(app, STACK), placement=FleetPlacement(), **options)
    for name in ADAPTERS:
        endpoint.add_adapter(name, artifact=AdapterArtifact.from_s3_url(f"s3://example-adapters/{name}/adapter.tar.gz"))
    app.synth()
    return directory


def changed_types(lines: list[str]) -> list[str]:
    return sorted(line.split()[1] for line in lines)


FEATURES = {
    "routing": ({"routing": Routing(strategy="PREFIX_AWARE", prefix_length=2048, concurrency_threshold=4)}, False),
    "observability": ({"observability": Observability(detailed_observability=True, enhanced_metrics=True)}, True),
    "capacity_reservation": (
        {
            "instances": Instances(
                capacity_reservation=CapacityReservation("arn:aws:sagemaker:us-east-1:123456789012:reservation/ml-g6-prod")
            )
        },
        False,
    ),
    "ssm_access": (
        {"instances": Instances(ssm_access=SsmAccess("incident response: inspect GPU memory of a stuck copy in place"))},
        False,
    ),
}
BASE_ONLY = {
    "copy_placement": {"base_copies": BaseCopies(placement=CopyPlacement(strategy="SPREAD"))},
    "data_cache": {"instances": Instances(data_cache=True)},
}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    return synth(tmp_path_factory.mktemp("baseline") / "cdk.out")


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_endpoint_config_options_change_the_endpoint_config_only(feature, baseline, tmp_path):
    options, touches_base = FEATURES[feature]
    diff = diff_assemblies(baseline, synth(tmp_path / "cdk.out", **options), STACK, tmp_path / "scratch")
    assert diff.added == [] and diff.removed == [] and list(diff.changed) == [f"{STACK}.template.json"]
    assert len(diff.unchanged) == 3, "each adapter shard template is unchanged"
    # The config is replaced (its properties are create-only); the endpoint then moves to the new
    # config through its GetAtt, which the diff does not list as a property change.
    expected = ["AWS::SageMaker::EndpointConfig"]
    if touches_base:
        expected.append("AWS::SageMaker::InferenceComponent")  # the base component's metrics endpoint
    assert changed_types(diff.lines()) == sorted(expected), diff.lines()
    config = next(line for line in diff.lines() if " AWS::SageMaker::EndpointConfig " in line)
    assert " replace " in config and ("MetricsConfig" if feature == "observability" else "ProductionVariants") in config
    assert all("Adapters" not in line for line in diff.lines()), "no adapter component changes"


@pytest.mark.parametrize("feature", sorted(BASE_ONLY))
def test_base_component_options_change_the_base_component_only(feature, baseline, tmp_path):
    diff = diff_assemblies(baseline, synth(tmp_path / "cdk.out", **BASE_ONLY[feature]), STACK, tmp_path / "scratch")
    assert diff.added == [] and diff.removed == [] and len(diff.unchanged) == 3
    [change] = diff.lines()
    assert change.startswith("[~] AWS::SageMaker::InferenceComponent") and "BaseComponent" in change, change
    assert change.endswith("{Specification}"), change


def test_switching_to_instance_pools_changes_the_endpoint_config_and_the_base_component_only(baseline, tmp_path):
    """One type to pools of two: the variant's InstanceType becomes InstancePools (the config is
    replaced), the base component's Specification becomes Specifications; no adapter shard changes."""
    from cdk_adapters.hosting.instance_pools import InstancePool

    pools = [InstancePool("ml.g6.2xlarge"), InstancePool("ml.g5.2xlarge")]
    options = {"instances": Instances(pools=pools, provisioning_timeout=cdk.Duration.minutes(15))}
    diff = diff_assemblies(baseline, synth(tmp_path / "cdk.out", **options), STACK, tmp_path / "scratch")
    assert diff.added == [] and diff.removed == [] and list(diff.changed) == [f"{STACK}.template.json"]
    assert len(diff.unchanged) == 3, "each adapter shard template is unchanged"
    assert changed_types(diff.lines()) == ["AWS::SageMaker::EndpointConfig", "AWS::SageMaker::InferenceComponent"], diff.lines()
    config = next(line for line in diff.lines() if " AWS::SageMaker::EndpointConfig " in line)
    assert " replace " in config and "ProductionVariants" in config, config
    base = next(line for line in diff.lines() if " AWS::SageMaker::InferenceComponent " in line)
    assert "BaseComponent" in base and "Specification" in base and "Specifications" in base, base
    assert all("Adapters" not in line for line in diff.lines()), "no adapter component changes"
