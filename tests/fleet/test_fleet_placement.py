"""Where adapter components go and how fast they are created: hash placement, capacity, pacing.

Small in-process fleets (milliseconds to seconds each); the 1,000-adapter proofs are in
test_fleet_scale.py.
"""

from __future__ import annotations

from collections import Counter

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.endpoint.fleet import IN_STACK_BUDGET, FleetPlacement
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import build_endpoint, new_stack
from tests.support.synth_refusal import TOO_MANY_RESOURCES, refused_at_synth

URL = "s3://example-adapters/published/{}/adapter.tar.gz"


def add(endpoint, names):
    for name in names:
        endpoint.add_adapter(name, artifact=AdapterArtifact.from_s3_url(URL.format(name)))


def components_of(template: Template) -> dict[str, dict]:
    return {
        logical_id: resource
        for logical_id, resource in template.find_resources("AWS::SageMaker::InferenceComponent").items()
        if "BaseInferenceComponentName" in resource["Properties"]["Specification"]
    }


def test_placement_depends_on_the_name_alone():
    placement = FleetPlacement()
    names = [f"tenant-{i}-v1" for i in range(2000)]
    shards = {name: placement.shard_of(name) for name in names}
    assert shards == {name: FleetPlacement().shard_of(name) for name in reversed(names)}  # order-free, repeatable
    assert {placement.shard_of(name.upper()) for name in names[:50]} == {shards[n] for n in names[:50]}  # case-free
    counts = Counter(shards.values())
    assert sorted(counts) == list(range(placement.shards))
    assert max(counts.values()) < 1.25 * len(names) / placement.shards, counts  # hashing spreads evenly


def test_nested_components_sit_in_the_shard_of_their_name_with_one_parameter_per_shard():
    stack = new_stack()
    endpoint = build_endpoint(stack, placement=FleetPlacement(shards=4))
    names = [f"tenant-{i}-v1" for i in range(12)]
    add(endpoint, names)
    assert sorted(endpoint.fleet.shards) == sorted({FleetPlacement(shards=4).shard_of(n) for n in names})
    for number, shard in endpoint.fleet.shards.items():
        template = Template.from_stack(shard)
        placed = {r["Properties"]["InferenceComponentName"] for r in components_of(template).values()}
        assert placed == {endpoint.adapter_component_names()[n] for n in names if FleetPlacement(shards=4).shard_of(n) == number}
        assert len(template.to_json().get("Parameters", {})) == 1  # the endpoint name, whatever the adapter count
    assert components_of(Template.from_stack(stack)) == {}  # nothing per adapter in the parent


def test_a_full_shard_is_a_clear_error_naming_the_adapter_and_field_and_adds_nothing():
    placement = FleetPlacement(shards=2, shard_capacity=3)
    endpoint = build_endpoint(placement=placement)
    names = [f"tenant-{i}-v1" for i in range(40)]
    in_zero = [n for n in names if placement.shard_of(n) == 0]
    add(endpoint, in_zero[:3])
    with pytest.raises(ConfigurationError) as caught:
        add(endpoint, [in_zero[3]])
    [problem] = caught.value.problems
    assert problem.subject == f"adapter {in_zero[3]!r} of MultiAdapterEndpoint 'Test-Stack/Serving'"
    assert problem.field == "placement"
    assert "would put its shard (Shard0) at 4 resources, over its capacity of 3" in problem.message
    assert "another MultiAdapterEndpoint" in problem.message
    assert len(endpoint.adapters) == 3
    # The other shard still takes adapters.
    add(endpoint, [next(n for n in names if placement.shard_of(n) == 1)])
    assert len(endpoint.adapters) == 4


@pytest.mark.parametrize(
    ("placement", "field", "text"),
    [
        (FleetPlacement(creation_width=0), "placement.creation_width", "positive integer"),
        (FleetPlacement(creation_width=-2), "placement.creation_width", "positive integer"),
        (FleetPlacement(shards=-1), "placement.shards", "from 0 to 100"),
        (FleetPlacement(shards=True), "placement.shards", "from 0 to 100"),
        (FleetPlacement(shard_capacity=500), "placement.shard_capacity", "CloudFormation allows 500"),
        (FleetPlacement(shard_capacity=0), "placement.shard_capacity", "from 1 to 499"),
    ],
)
def test_bad_placement_is_refused_before_anything_is_created(placement, field, text):
    stack = new_stack()
    with pytest.raises(ConfigurationError) as caught:
        build_endpoint(stack, placement=placement)
    [problem] = caught.value.problems
    assert (problem.subject, problem.field) == ("MultiAdapterEndpoint 'Test-Stack/Serving'", field)
    assert text in problem.message
    assert Template.from_stack(stack).to_json().get("Resources", {}) == {}


def dependencies_between_components(template: Template) -> dict[str, list[str]]:
    components = components_of(template)
    return {
        logical_id: [d for d in resource.get("DependsOn", []) if d in components] for logical_id, resource in components.items()
    }


@pytest.mark.parametrize(
    "placement", [FleetPlacement(shards=2, creation_width=3), FleetPlacement.in_endpoint_stack(creation_width=3)]
)
def test_pacing_chains_each_stacks_components_into_width_lanes(placement):
    stack = new_stack()
    endpoint = build_endpoint(stack, placement=placement)
    add(endpoint, [f"tenant-{i}-v1" for i in range(20)])
    stacks = list(endpoint.fleet.shards.values()) or [stack]
    for each in stacks:
        template = Template.from_stack(each)
        links = dependencies_between_components(template)
        heads = [component for component, depends in links.items() if not depends]
        members = [r["Properties"]["InferenceComponentName"].rsplit("-", 2)[-2:] for r in components_of(template).values()]
        lanes = {placement.lane_of("-".join(["tenant", *member])) for member in members}
        assert len(heads) == len(lanes) <= 3, links  # one chain per lane in use: at most W start at once
        assert all(len(depends) <= 1 for depends in links.values())  # one predecessor each: chains
        followers = Counter(d for depends in links.values() for d in depends)
        assert all(count == 1 for count in followers.values())  # nothing waits twice on one component


def test_removing_a_paced_component_re_links_only_its_successor():
    names = [f"tenant-{i}-v1" for i in range(24)]
    placement = FleetPlacement.in_endpoint_stack(creation_width=3)

    def depends_on(members):
        stack = new_stack()
        endpoint = build_endpoint(stack, placement=placement)
        add(endpoint, members)
        components = components_of(Template.from_stack(stack))
        by_id = {logical_id: r["Properties"]["InferenceComponentName"] for logical_id, r in components.items()}
        return {
            by_id[logical_id]: sorted(by_id[d] for d in resource.get("DependsOn", []) if d in by_id)
            for logical_id, resource in components.items()
        }

    removed = names[10]
    before, after = depends_on(names), depends_on([n for n in names if n != removed])
    changed = [component for component in after if after[component] != before[component]]
    successors = [component for component, depends in before.items() if any(removed in d for d in depends)]
    assert changed == successors and len(changed) <= 1, (changed, successors)
    if changed:  # it now waits on what the removed one waited on: the chain closes over the gap
        removed_component = next(c for c in before if c.endswith(removed))
        assert after[changed[0]] == before[removed_component]


def test_without_pacing_no_component_waits_on_another():
    stack = new_stack()
    endpoint = build_endpoint(stack)
    add(endpoint, [f"tenant-{i}-v1" for i in range(10)])
    assert all(depends == [] for depends in dependencies_between_components(Template.from_stack(stack)).values())


def test_in_stack_components_past_the_budget_fail_synth_with_advice(tmp_path):
    app = cdk.App(outdir=str(tmp_path / "out"))
    stack = cdk.Stack(app, "Test-Stack")
    endpoint = build_endpoint(stack)  # the construct tests' default: in the endpoint's own stack
    add(endpoint, [f"tenant-{i}-v1" for i in range(IN_STACK_BUDGET)])
    with refused_at_synth() as caught:
        app.synth()
    message = str(caught.value)
    assert f"with {IN_STACK_BUDGET} adapter components in the endpoint's own stack" in message
    assert f"this library stops at {IN_STACK_BUDGET}" in message and "another MultiAdapterEndpoint" in message
    assert not list((tmp_path / "out").glob("*.template.json"))


def test_extras_placed_beside_components_cannot_overflow_a_shard(tmp_path):
    """Per-adapter extras (alarms) share their adapter's shard: the capacity holds them too."""
    from aws_cdk import aws_cloudwatch as cloudwatch

    app = cdk.App(outdir=str(tmp_path / "out"))
    stack = cdk.Stack(app, "Test-Stack")
    endpoint = build_endpoint(stack, placement=FleetPlacement(shards=1, shard_capacity=4))
    add(endpoint, [f"tenant-{i}-v1" for i in range(4)])
    shard = endpoint.fleet.stack_of("tenant-0-v1")
    cloudwatch.Alarm(shard, "Extra", metric=cloudwatch.Metric(namespace="N", metric_name="M"), threshold=1, evaluation_periods=1)
    with refused_at_synth(error=TOO_MANY_RESOURCES) as caught:
        app.synth()
    assert "Test-Stack/Serving/Adapters/Shard0': 5 is greater than allowed maximum of 4" in str(caught.value)
    assert not list((tmp_path / "out").glob("*.template.json"))
