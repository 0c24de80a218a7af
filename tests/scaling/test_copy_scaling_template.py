"""What copy autoscaling puts in the template: the scalable target, target tracking, scale to zero
(MinCapacity 0, MinInstanceCount 0, a step +1 on one failed request) and nothing on the base component."""

from __future__ import annotations

from collections import Counter

import pytest

from cdk_adapters import Instances
from cdk_adapters.hosting.scaling import COPY_COUNT_DIMENSION, SERVICE_LINKED_ROLE, WAKE_UP_QUERY, WakeUpScope
from tests.scaling.conftest import base_logical_id, endpoint_with_adapters, resources, scaled_out, scaled_to_zero

TARGET = "AWS::ApplicationAutoScaling::ScalableTarget"
POLICY = "AWS::ApplicationAutoScaling::ScalingPolicy"
ALARM = "AWS::CloudWatch::Alarm"


@pytest.fixture(scope="module")
def zero():
    return scaled_to_zero("Scale-Zero")


@pytest.fixture(scope="module")
def out():
    return scaled_out("Scale-Out")


def only(found: dict[str, dict]) -> tuple[str, dict]:
    assert len(found) == 1, list(found)
    return next(iter(found.items()))


def test_the_scalable_target_is_the_base_components_copy_count_and_waits_for_it(zero, out):
    for endpoint, low, high in ((zero, 0, 1), (out, 2, 8)):
        _, target = only(resources(endpoint, TARGET))
        properties = target["Properties"]
        assert properties["ServiceNamespace"] == "sagemaker"
        assert properties["ScalableDimension"] == COPY_COUNT_DIMENSION == "sagemaker:inference-component:DesiredCopyCount"
        assert properties["ResourceId"] == f"inference-component/{endpoint.base_component_name}"
        assert (properties["MinCapacity"], properties["MaxCapacity"]) == (low, high)
        assert properties["RoleARN"]["Fn::Join"][1][-1].endswith(SERVICE_LINKED_ROLE)
        # The resource id is a name, so the order comes from an explicit dependency.
        assert base_logical_id(endpoint) in target["DependsOn"]


def test_target_tracking_uses_the_typed_metric_target_and_cooldowns(zero, out):
    tracking = {
        policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]["PredefinedMetricSpecification"][
            "PredefinedMetricType"
        ]: policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
        for policy in resources(out, POLICY).values()
    }
    assert tracking == {
        "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution": {
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
            },
            "TargetValue": 5,
            "ScaleInCooldown": 600,
            "ScaleOutCooldown": 30,
        },
        "SageMakerInferenceComponentInvocationsPerCopy": {
            "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"},
            "TargetValue": 120,
            "ScaleInCooldown": 300,
            "ScaleOutCooldown": 60,
        },
    }
    assert all(p["Properties"]["PolicyType"] == "TargetTrackingScaling" for p in resources(out, POLICY).values())
    assert resources(out, ALARM) == {}, "target tracking brings its own (AAS-managed) alarms"


def test_scale_to_zero_releases_the_last_instance_and_wakes_on_one_failed_request(zero):
    [config] = resources(zero, "AWS::SageMaker::EndpointConfig").values()
    managed = config["Properties"]["ProductionVariants"][0]["ManagedInstanceScaling"]
    assert managed == {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 1}
    assert config["Properties"]["ProductionVariants"][0]["InitialInstanceCount"] == 1, "a deploy starts with an instance"

    steps = {k: p for k, p in resources(zero, POLICY).items() if p["Properties"]["PolicyType"] == "StepScaling"}
    step_id, step = only(steps)
    assert step["Properties"]["StepScalingPolicyConfiguration"] == {
        "AdjustmentType": "ChangeInCapacity",
        "MetricAggregationType": "Maximum",
        "Cooldown": 600,
        "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
    }
    _, alarm = only(resources(zero, ALARM))
    properties = alarm["Properties"]
    # >= 1 (not the AWS page's > 1): a single failed request in a minute wakes the endpoint.
    assert (properties["ComparisonOperator"], properties["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1)
    assert (properties["EvaluationPeriods"], properties["DatapointsToAlarm"], properties["TreatMissingData"]) == (
        1,
        1,
        "notBreaching",
    )
    assert properties["AlarmActions"] == [{"Ref": step_id}]
    [query] = properties["Metrics"]
    assert query == {
        "Expression": WAKE_UP_QUERY,
        "Id": query["Id"],
        "Label": "NoCapacityInvocationFailures",
        "Period": 60,
        "ReturnData": True,
    }
    assert 'FROM SCHEMA("AWS/SageMaker", InferenceComponentName)' in WAKE_UP_QUERY and "WHERE" not in WAKE_UP_QUERY


def test_base_component_scope_alarms_on_the_base_metric_alone():
    endpoint = scaled_to_zero("Scale-Zero-Base", scope=WakeUpScope.BASE_COMPONENT)
    _, alarm = only(resources(endpoint, ALARM))
    properties = alarm["Properties"]
    assert properties["Namespace"] == "AWS/SageMaker" and properties["MetricName"] == "NoCapacityInvocationFailures"
    assert properties["Dimensions"] == [{"Name": "InferenceComponentName", "Value": endpoint.base_component_name}]
    assert (properties["Statistic"], properties["Period"], properties["ComparisonOperator"]) == (
        "Maximum",
        60,
        "GreaterThanOrEqualToThreshold",
    )


def test_scaling_adds_four_resources_to_scale_to_zero_and_two_to_track_and_leaves_the_base_as_it_was(zero):
    plain = endpoint_with_adapters("Scale-Zero", instances=Instances(instance_type="ml.g6.2xlarge", min_count=0, max_count=1))
    tracked = endpoint_with_adapters("Scale-Track", instances=Instances(instance_type="ml.g6.2xlarge"))
    tracked.base_component.auto_scale_copy_count(min_copies=1, max_copies=1).scale_on_invocations(60)
    before = Counter(r["Type"] for r in resources(plain).values())
    assert Counter(r["Type"] for r in resources(zero).values()) - before == Counter({TARGET: 1, POLICY: 2, ALARM: 1})
    assert Counter(r["Type"] for r in resources(tracked).values()) - before == Counter({TARGET: 1, POLICY: 1})
    # The base component's own resource is byte-for-byte the same: scaling never re-sends CopyCount.
    assert resources(zero)[base_logical_id(zero)] == resources(plain)[base_logical_id(plain)]
    assert resources(zero)[base_logical_id(zero)]["Properties"]["RuntimeConfig"] == {"CopyCount": 1}


def test_the_wake_up_is_one_alarm_that_does_not_change_with_the_adapters(zero):
    """No adapter name is in the wake-up: 2 adapters or 40, the scaling resources are identical."""
    many = scaled_to_zero("Scale-Zero", adapters=40)
    scaling_types = (TARGET, POLICY, ALARM)
    assert resources(many, *scaling_types) == resources(zero, *scaling_types)
    assert len(resources(many, ALARM)) == 1
    assert not any(name in str(resources(many, *scaling_types)) for name in many.adapter_component_names().values())
