"""The base component's rolling update: the rendered DeploymentConfig, and every configuration the
SageMaker API would refuse (or that could never roll back) refused at synth, all at once."""

from __future__ import annotations

import pytest
from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from cdk_adapters import BaseCopies, Instances
from cdk_adapters.hosting.rolling_update import BatchSize, RollingUpdate
from cdk_adapters.monitoring import AlarmThresholds, MonitoringAlarms
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import build_endpoint as build_one_gpu_endpoint
from tests.constructs.conftest import new_stack
from tests.monitoring.conftest import resources, template_of


def build_endpoint(*args, **props):
    """A four-GPU instance type, so the several copies a rolling update needs fit on one instance."""
    return build_one_gpu_endpoint(*args, **{"instances": Instances(instance_type="ml.g6.12xlarge"), **props})


def base_component_properties(endpoint) -> dict:
    (base,) = [
        ic["Properties"]
        for ic in resources(template_of(endpoint), "AWS::SageMaker::InferenceComponent").values()
        if "VariantName" in ic["Properties"]
    ]
    return base


def test_rolling_update_rolls_back_on_the_endpoint_error_alarm():
    endpoint = build_endpoint(
        alarms=MonitoringAlarms(),
        deployment=RollingUpdate(
            maximum_batch_size=BatchSize.percent(25),
            wait_interval=Duration.minutes(10),
            maximum_execution_timeout=Duration.hours(2),
            rollback_maximum_batch_size=BatchSize.copies(2),
            rollback_on_endpoint_alarms=("error_rate", "latency_p95"),
        ),
        base_copies=BaseCopies(count=4),
    )
    template = template_of(endpoint)
    error_alarm = next(
        key
        for key, alarm in resources(template, "AWS::CloudWatch::Alarm").items()
        if alarm["Properties"]["AlarmName"].endswith("/error-rate")
    )
    latency_alarm = next(
        key
        for key, alarm in resources(template, "AWS::CloudWatch::Alarm").items()
        if alarm["Properties"]["AlarmName"].endswith("/latency-p95")
    )
    assert base_component_properties(endpoint)["DeploymentConfig"] == {
        "RollingUpdatePolicy": {
            "MaximumBatchSize": {"Type": "CAPACITY_PERCENT", "Value": 25},
            "WaitIntervalInSeconds": 600,
            "MaximumExecutionTimeoutInSeconds": 7200,
            "RollbackMaximumBatchSize": {"Type": "COPY_COUNT", "Value": 2},
        },
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": {"Ref": error_alarm}}, {"AlarmName": {"Ref": latency_alarm}}]},
    }


def test_defaults_are_one_copy_per_batch_and_five_minutes_of_bake_time_with_a_given_alarm():
    stack = new_stack()
    alarm = cloudwatch.Alarm.from_alarm_name(stack, "Imported", "team-wide-5xx")
    endpoint = build_endpoint(stack, deployment=RollingUpdate(rollback_alarms=[alarm]), base_copies=BaseCopies(count=2))
    assert base_component_properties(endpoint)["DeploymentConfig"] == {
        "RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1}, "WaitIntervalInSeconds": 300},
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "team-wide-5xx"}]},
    }


def test_no_deployment_leaves_the_config_out():
    assert "DeploymentConfig" not in base_component_properties(build_endpoint(base_copies=BaseCopies(count=2)))


def refused(**props) -> str:
    with pytest.raises(ConfigurationError) as raised:
        build_endpoint(**props)
    return str(raised.value)


def test_a_single_copy_has_no_batch_of_five_to_fifty_percent():
    text = refused(deployment=RollingUpdate(), base_copies=BaseCopies(count=1))
    assert (
        "deployment.maximum_batch_size: a rolling update replaces 5-50% of the copies per batch, and base_copies.count=1" in text
    )


def test_batch_sizes_out_of_range_are_refused():
    assert "deployment.maximum_batch_size.value: is 60%; SageMaker accepts 5% to 50% of the copies" in refused(
        deployment=RollingUpdate(maximum_batch_size=BatchSize.percent(60)), base_copies=BaseCopies(count=4)
    )
    assert (
        "deployment.maximum_batch_size.value: is 3 of 4 copies; SageMaker takes at most 50% of the copies per batch (2 here)"
        in refused(deployment=RollingUpdate(maximum_batch_size=BatchSize.copies(3)), base_copies=BaseCopies(count=4))
    )
    assert "deployment.maximum_batch_size.value: must be at least 1 copy, got 0" in refused(
        deployment=RollingUpdate(maximum_batch_size=BatchSize.copies(0)), base_copies=BaseCopies(count=4)
    )
    assert "deployment.maximum_batch_size.type: must be one of COPY_COUNT, CAPACITY_PERCENT, got 'INSTANCE_COUNT'" in refused(
        deployment=RollingUpdate(maximum_batch_size=BatchSize("INSTANCE_COUNT", 1)), base_copies=BaseCopies(count=4)
    )


def test_a_rollback_with_no_alarm_is_refused():
    text = refused(deployment=RollingUpdate(rollback_maximum_batch_size=BatchSize.copies(1)), base_copies=BaseCopies(count=2))
    assert "deployment.rollback_maximum_batch_size: is set but no alarm can trigger a rollback" in text


def test_rolling_back_on_an_alarm_the_endpoint_does_not_create_is_refused():
    off = refused(deployment=RollingUpdate(rollback_on_endpoint_alarms=("error_rate",)), base_copies=BaseCopies(count=2))
    assert (
        "deployment.rollback_on_endpoint_alarms: 'error_rate' is not an alarm of this endpoint (it creates: none (alarms are off))"
        in off
    )
    latency_off = refused(
        alarms=MonitoringAlarms(endpoint=AlarmThresholds(latency_p95_ms=None)),
        deployment=RollingUpdate(rollback_on_endpoint_alarms=("latency_p95",)),
        base_copies=BaseCopies(count=2),
    )
    assert "'latency_p95' is not an alarm of this endpoint (it creates: error_rate, cold_start_share)" in latency_off


def test_every_problem_at_once_wait_timeout_and_alarm_count():
    stack = new_stack()
    alarms = [cloudwatch.Alarm.from_alarm_name(stack, f"A{index}", f"alarm-{index}") for index in range(11)]
    with pytest.raises(ConfigurationError) as raised:
        build_endpoint(
            stack,
            deployment=RollingUpdate(
                wait_interval=Duration.hours(2), maximum_execution_timeout=Duration.minutes(5), rollback_alarms=alarms
            ),
            base_copies=BaseCopies(count=2),
        )
    text = str(raised.value)
    assert "(3 problem(s))" in text
    assert "deployment.wait_interval: is 7200 s; SageMaker accepts 0 to 3600 s" in text
    assert "deployment.maximum_execution_timeout: is 300 s; SageMaker accepts 600 to 28800 s" in text
    assert "deployment.rollback_alarms: names 11 alarms; SageMaker takes at most 10" in text


def test_a_copy_batch_below_five_percent_of_the_copies_is_refused():
    text = refused(
        deployment=RollingUpdate(maximum_batch_size=BatchSize.copies(1)),
        base_copies=BaseCopies(count=40),
        instances=Instances(instance_type="ml.p5.48xlarge", initial_count=5, max_count=5),
    )
    assert "is 1 of 40 copies; SageMaker takes at least 5% of the copies per batch (2 here)" in text
    build_endpoint(
        deployment=RollingUpdate(maximum_batch_size=BatchSize.copies(2), rollback_alarms=[]),
        base_copies=BaseCopies(count=40),
        instances=Instances(instance_type="ml.p5.48xlarge", initial_count=5, max_count=5),
    )
