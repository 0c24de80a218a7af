"""Every bad scaling configuration is refused with the subject (the component) and the field, all
problems at once, and nothing created; what only the finished tree shows is refused at synth."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from cdk_adapters import Instances
from cdk_adapters.endpoint.components import ComputeRequirements
from cdk_adapters.hosting.scaling import ScalableCopyCount
from cdk_adapters.problems import ConfigurationError
from tests.scaling.conftest import SCALE_OUT, SCALE_TO_ZERO, endpoint_with_adapters, fields_of
from tests.support.synth_refusal import refused_at_synth


def base_subject(endpoint) -> str:
    return f"base inference component {endpoint.base_component_name!r}"


def refused(call) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as caught:
        call()
    return caught.value


def scaling_constructs(endpoint) -> list:
    return [c for c in cdk.Stack.of(endpoint).node.find_all() if isinstance(c, ScalableCopyCount)]


def test_min_above_max_and_bad_counts():
    endpoint = endpoint_with_adapters("Refuse-Range", **SCALE_OUT)
    subject = base_subject(endpoint)
    error = refused(lambda: endpoint.base_component.auto_scale_copy_count(min_copies=5, max_copies=3))
    assert fields_of(error) == [(subject, "min_copies")]
    assert "(5) must not exceed max_copies (3)" in str(error)
    error = refused(lambda: endpoint.base_component.auto_scale_copy_count(min_copies=-1, max_copies=0))
    assert fields_of(error) == [(subject, "min_copies"), (subject, "max_copies")]
    assert scaling_constructs(endpoint) == [] and endpoint.base_component.copy_scaling is None


def test_copy_count_outside_the_range_is_refused_with_why():
    endpoint = endpoint_with_adapters("Refuse-Copies", **SCALE_OUT)  # copy_count=2
    error = refused(lambda: endpoint.base_component.auto_scale_copy_count(min_copies=3, max_copies=8))
    assert fields_of(error) == [(base_subject(endpoint), "base_copies.count")]
    assert "every deploy creates the component with base_copies.count copies (never 0)" in str(error)


@pytest.mark.parametrize(
    ("overrides", "max_copies", "says"),
    [
        # One L4 per ml.g6.2xlarge: one copy per instance, one instance at most.
        (
            SCALE_TO_ZERO,
            2,
            "a ml.g6.2xlarge holds 1 copies (1 GPU(s), 1 per copy), so instances.max_count=1 holds 1; "
            "raise instances.max_count to 2 or lower max_copies to 1",
        ),
        # Four GPUs but 192 GiB: three 64 GiB copies per ml.g6.12xlarge, 12 on four instances.
        (
            dict(SCALE_OUT, compute=ComputeRequirements(min_memory_required_in_mb=65536)),
            13,
            "holds 3 copies (192 GiB host memory, 65536 MiB per copy), so instances.max_count=4 holds 12; "
            "raise instances.max_count to 5 or lower max_copies to 12",
        ),
        # Two GPUs per copy: two copies per instance.
        (
            dict(SCALE_OUT, compute=ComputeRequirements(min_memory_required_in_mb=16384, accelerator_devices=2)),
            9,
            "holds 2 copies (4 GPU(s), 2 per copy)",
        ),
    ],
)
def test_more_copies_than_the_instances_can_hold(overrides, max_copies, says):
    endpoint = endpoint_with_adapters("Refuse-Fit", **overrides)
    error = refused(lambda: endpoint.base_component.auto_scale_copy_count(min_copies=1, max_copies=max_copies))
    assert fields_of(error) == [(base_subject(endpoint), "max_copies")]
    assert says in str(error)
    assert scaling_constructs(endpoint) == []


def test_an_instance_type_outside_the_table_cannot_be_checked_so_it_is_refused():
    endpoint = endpoint_with_adapters("Refuse-Type", instances=Instances(instance_type="ml.p3.2xlarge"))
    error = refused(lambda: endpoint.base_component.auto_scale_copy_count(min_copies=1, max_copies=2))
    assert fields_of(error) == [(base_subject(endpoint), "instances.instance_type")]
    assert "'ml.p3.2xlarge' is not a GPU instance type this library knows" in str(error)


def test_target_values_must_be_positive_and_cooldowns_whole_seconds_within_an_hour():
    endpoint = endpoint_with_adapters("Refuse-Target", **SCALE_OUT)
    copies = endpoint.base_component.auto_scale_copy_count(min_copies=2, max_copies=8)
    subject = base_subject(endpoint)
    for bad in (0, -3, float("nan"), True):
        error = refused(lambda bad=bad: copies.scale_on_concurrent_requests(bad))
        assert fields_of(error) == [(subject, "scale_on_concurrent_requests.target_requests_per_copy")]
    error = refused(
        lambda: copies.scale_on_invocations(
            0, scale_in_cooldown=cdk.Duration.hours(2), scale_out_cooldown=cdk.Duration.millis(1500)
        )
    )
    assert fields_of(error) == [
        (subject, "scale_on_invocations.target_invocations_per_copy"),
        (subject, "scale_on_invocations.scale_in_cooldown"),
        (subject, "scale_on_invocations.scale_out_cooldown"),
    ]
    assert "is 7200 s; must be whole seconds from 0 to 3600" in str(error) and "(3 problem(s))" in str(error)
    assert copies.tracked == {} and copies.scalable_target.node.try_find_child("ConcurrentRequestsPerCopy") is None


def test_scale_to_zero_needs_min_instance_count_zero_and_min_copies_zero():
    endpoint = endpoint_with_adapters("Refuse-Zero", instances=Instances(instance_type="ml.g6.12xlarge", max_count=2))
    copies = endpoint.base_component.auto_scale_copy_count(min_copies=1, max_copies=4)
    copies.scale_on_concurrent_requests(4)
    error = refused(lambda: copies.scale_to_zero(wake_up_cooldown=cdk.Duration.hours(3)))
    subject = base_subject(endpoint)
    assert fields_of(error) == [
        (subject, "scale_to_zero.wake_up_cooldown"),
        (subject, "min_copies"),
        (subject, "instances.min_count"),
    ]
    assert "MultiAdapterEndpoint(instances=Instances(min_count=0))" in str(error)
    assert copies.wake_up is None and copies.node.try_find_child("WakeUpAlarm") is None


def test_adapter_components_have_no_copies_to_scale():
    endpoint = endpoint_with_adapters("Refuse-Adapter", **SCALE_OUT)
    adapter = endpoint.adapters["tenant-000-v1"]
    error = refused(lambda: adapter.auto_scale_copy_count(min_copies=1, max_copies=4))
    assert fields_of(error) == [(f"adapter component {adapter.inference_component_name!r}", "auto_scale_copy_count")]
    assert "adapter components have no copies" in str(error) and "endpoint.base_component.auto_scale_copy_count" in str(error)


def test_scaling_twice_is_refused():
    endpoint = endpoint_with_adapters("Refuse-Twice", **SCALE_TO_ZERO)
    copies = endpoint.base_component.auto_scale_copy_count(min_copies=0, max_copies=1)
    copies.scale_on_concurrent_requests(4)
    copies.scale_to_zero()
    for call, field in (
        (lambda: endpoint.base_component.auto_scale_copy_count(min_copies=0, max_copies=1), "auto_scale_copy_count"),
        (lambda: copies.scale_on_concurrent_requests(8), "scale_on_concurrent_requests"),
        (lambda: copies.scale_to_zero(), "scale_to_zero"),
    ):
        assert fields_of(refused(call)) == [(base_subject(endpoint), field)]


@pytest.mark.parametrize(
    ("min_copies", "policy", "says"),
    [
        (0, True, "min_copies: is 0 without scale_to_zero(): nothing would add the first copy back"),
        (1, False, "auto_scale_copy_count: has no scaling policy"),
    ],
)
def test_what_only_the_finished_tree_shows_is_refused_at_synth(min_copies, policy, says):
    endpoint = endpoint_with_adapters("Refuse-Synth", **SCALE_TO_ZERO)
    copies = endpoint.base_component.auto_scale_copy_count(min_copies=min_copies, max_copies=1)
    if policy:
        copies.scale_on_invocations(30)
    with refused_at_synth(f"base inference component {endpoint.base_component_name!r}: {says}"):
        Template.from_stack(cdk.Stack.of(endpoint))
