"""Monitoring at 1,000 adapters (manifests from tests/fleet/builders.py, built in-process): the
dashboard stays within CloudWatch's limits and is the same as at 10 adapters, per-adapter alarms
stay within the shards' capacity, and alarms that would not fit are refused with advice."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
import yaml

from cdk_adapters.endpoint.components import ComputeRequirements
from cdk_adapters.endpoint.fleet import CLOUDFORMATION_RESOURCE_LIMIT, FleetPlacement, own_resource_count
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.manifest import endpoint_from_manifest
from cdk_adapters.monitoring import dashboard_limit_problems
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import DIGEST_IMAGE
from tests.fleet.builders import STACK, write_fleet_manifest
from tests.monitoring.conftest import dashboard_body, template_of

FLEET = 1000
ERROR_RATE_ONLY = {"latency_p95_ms": None, "cold_start_share_percent": None}


def fleet_manifest(directory, count: int, alarms) -> str:
    path = write_fleet_manifest(directory, range(count))
    document = yaml.safe_load(path.read_text())
    for row in document["adapters"]:
        row["alarms"] = alarms
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def build(manifest, **props):
    stack = cdk.Stack(cdk.App(), STACK)
    return endpoint_from_manifest(
        stack,
        "Serving",
        manifest=manifest,
        image=ContainerImage.from_digest_uri(DIGEST_IMAGE),
        compute=ComputeRequirements(min_memory_required_in_mb=16384),
        **props,
    )


@pytest.fixture(scope="module")
def error_rate_fleet(tmp_path_factory):
    """1,000 adapters, each with its error-rate alarm, in the default placement (8 shards of 400)."""
    return build(fleet_manifest(tmp_path_factory.mktemp("fleet-alarms"), FLEET, ERROR_RATE_ONLY))


def test_a_thousand_error_rate_alarms_fit_the_default_shards(error_rate_fleet):
    endpoint = error_rate_fleet
    assert len(endpoint.monitoring.adapter_alarms) == FLEET
    capacity = endpoint.placement.shard_capacity
    held = {number: own_resource_count(shard) for number, shard in endpoint.fleet.shards.items()}
    assert sum(held.values()) == 2 * FLEET, "one component and one alarm per adapter"
    assert max(held.values()) <= capacity < CLOUDFORMATION_RESOURCE_LIMIT
    for shard in endpoint.fleet.shards.values():
        alarms = [
            c for c in shard.node.find_all() if isinstance(c, cdk.CfnResource) and c.cfn_resource_type == "AWS::CloudWatch::Alarm"
        ]
        components = [
            c
            for c in shard.node.find_all()
            if isinstance(c, cdk.CfnResource) and c.cfn_resource_type == "AWS::SageMaker::InferenceComponent"
        ]
        assert len(alarms) == len(components), "each adapter's alarm sits in its component's shard"


def test_the_dashboard_is_within_limits_and_the_same_as_at_ten_adapters(error_rate_fleet, tmp_path):
    body = dashboard_body(template_of(error_rate_fleet))
    assert dashboard_limit_problems(body) == []
    assert len(body["widgets"]) < 20
    ten = build(fleet_manifest(tmp_path, 10, ERROR_RATE_ONLY))
    assert dashboard_body(template_of(ten)) == body


def test_all_three_alarms_for_a_thousand_adapters_need_more_shards(tmp_path):
    manifest = fleet_manifest(tmp_path, FLEET, True)
    with pytest.raises(ConfigurationError) as raised:
        build(manifest)
    text = str(raised.value)
    assert "3 alarm(s) would put its shard" in text and "over its capacity of 400" in text
    assert "FleetPlacement(shards=N)" in text
    wide = build(manifest, placement=FleetPlacement(shards=16))
    held = [own_resource_count(shard) for shard in wide.fleet.shards.values()]
    assert sum(held) == 4 * FLEET and max(held) <= 400
