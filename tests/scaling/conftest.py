"""Endpoints with autoscaled copies, built in-process on tests/constructs' smallest valid endpoint.

`build_endpoint` keeps adapter components in the endpoint's stack; the deploy-diff tests use the
default nested shards through the fleet builders instead.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from cdk_adapters import BaseCopies, Instances
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import build_endpoint, new_stack

ADAPTER_URL = "s3://example-adapters/{}/v1/adapter.tar.gz"
SCALE_TO_ZERO = {"instances": Instances(instance_type="ml.g6.2xlarge", min_count=0, max_count=1)}
"""One L4 instance at most, released when idle: room for one 16 GiB copy."""
SCALE_OUT = {
    "instances": Instances(instance_type="ml.g6.12xlarge", initial_count=2, min_count=2, max_count=4),
    "base_copies": BaseCopies(count=2),
}
"""Four L4 GPUs per instance, two to four instances: room for 16 copies of one GPU each."""


def endpoint_with_adapters(name: str, adapters: int = 2, **overrides: Any) -> MultiAdapterEndpoint:
    endpoint = build_endpoint(new_stack(name), **overrides)
    for index in range(adapters):
        adapter = f"tenant-{index:03d}-v1"
        endpoint.add_adapter(adapter, artifact=AdapterArtifact.from_s3_url(ADAPTER_URL.format(adapter)))
    return endpoint


def scaled_to_zero(name: str, adapters: int = 2, **scale_to_zero: Any) -> MultiAdapterEndpoint:
    """Scale-to-zero endpoint: copies 0..1 tracking concurrent requests, woken by one alarm."""
    endpoint = endpoint_with_adapters(name, adapters, **SCALE_TO_ZERO)
    copies = endpoint.base_component.auto_scale_copy_count(min_copies=0, max_copies=1)
    copies.scale_on_concurrent_requests(4)
    copies.scale_to_zero(**scale_to_zero)
    return endpoint


def scaled_out(name: str) -> MultiAdapterEndpoint:
    """Production shape: at least two copies, up to eight, on invocations and concurrency."""
    endpoint = endpoint_with_adapters(name, **SCALE_OUT)
    copies = endpoint.base_component.auto_scale_copy_count(min_copies=2, max_copies=8)
    copies.scale_on_concurrent_requests(
        5, scale_in_cooldown=cdk.Duration.minutes(10), scale_out_cooldown=cdk.Duration.seconds(30)
    )
    copies.scale_on_invocations(120)
    return endpoint


def resources(endpoint: MultiAdapterEndpoint, *types: str) -> dict[str, dict]:
    template = Template.from_stack(cdk.Stack.of(endpoint)).to_json()["Resources"]
    return {key: value for key, value in template.items() if not types or value["Type"] in types}


def base_logical_id(endpoint: MultiAdapterEndpoint) -> str:
    return cdk.Stack.of(endpoint).get_logical_id(endpoint.base_component.resource)


def fields_of(error: ConfigurationError) -> list[tuple[str, str]]:
    return [(problem.subject, problem.field) for problem in error.problems]
