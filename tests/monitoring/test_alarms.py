"""Alarms on the request metrics: endpoint rollup and opted-in adapters, their placement in the
adapter's shard, SNS actions, overrides, and every bad configuration refused with nothing created."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import Duration
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from cdk_adapters.endpoint.fleet import FleetPlacement, own_resource_count
from cdk_adapters.monitoring import AlarmThresholds, MonitoringAlarms, RequestMetrics
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import new_stack
from tests.monitoring.conftest import alarms_by_name, artifact, endpoint_with, template_of
from tests.support.synth_refusal import refused_at_synth


def test_endpoint_alarms_watch_the_rollup_with_one_metric_each():
    endpoint = endpoint_with(alarms=MonitoringAlarms())
    alarms = alarms_by_name(template_of(endpoint))
    prefix = endpoint.prefix
    assert set(alarms) == {f"{prefix}/error-rate", f"{prefix}/latency-p95", f"{prefix}/cold-start-share"}
    rollup = [{"Name": "EndpointName", "Value": endpoint.endpoint_name}]
    error = alarms[f"{prefix}/error-rate"]
    assert (error["Namespace"], error["MetricName"], error["Statistic"], error["Threshold"]) == (
        "CdkAdapters",
        "Errors5XX",
        "Average",
        0.05,
    )
    assert error["Dimensions"] == rollup
    assert (error["EvaluationPeriods"], error["DatapointsToAlarm"], error["Period"]) == (3, 2, 300)
    assert error["ComparisonOperator"] == "GreaterThanThreshold"
    assert error["TreatMissingData"] == "notBreaching"
    latency = alarms[f"{prefix}/latency-p95"]
    assert (latency["MetricName"], latency["ExtendedStatistic"], latency["Threshold"]) == ("Latency", "p95", 30000)
    cold = alarms[f"{prefix}/cold-start-share"]
    assert (cold["MetricName"], cold["Statistic"], cold["Threshold"]) == ("ColdStarts", "Average", 0.25)
    assert "raise max_loras" in cold["AlarmDescription"]
    assert "AlarmActions" not in error  # no topic given: acknowledged for the nag packs, see test_nag_lint


def test_adapters_opt_in_with_overrides_and_none_turns_an_alarm_off():
    endpoint = endpoint_with(alarms=MonitoringAlarms(endpoint=None, adapters=AlarmThresholds(error_rate_percent=3)))
    created = endpoint.add_adapter_alarms(
        "support-en-v1", {"latency_p95_ms": 8000, "cold_start_share_percent": None, "period": Duration.minutes(1)}
    )
    assert set(created) == {"error_rate", "latency_p95"}
    alarms = alarms_by_name(template_of(endpoint))
    component = endpoint.adapters["support-en-v1"].inference_component_name
    assert set(alarms) == {f"{component}/error-rate", f"{component}/latency-p95"}
    assert alarms[f"{component}/error-rate"]["Threshold"] == 0.03
    assert alarms[f"{component}/latency-p95"]["Threshold"] == 8000
    assert alarms[f"{component}/latency-p95"]["Period"] == 60
    assert alarms[f"{component}/error-rate"]["Dimensions"] == [
        {"Name": "Adapter", "Value": "support-en-v1"},  # the adapter key the container writes (adapter_identity)
        {"Name": "EndpointName", "Value": endpoint.endpoint_name},
    ]


def test_opting_in_by_name_in_the_props_creates_alarms_as_the_adapter_is_added():
    endpoint = endpoint_with(alarms=MonitoringAlarms(endpoint=None, adapter_names=["Support-EN-v1"]))
    component = endpoint.adapters["support-en-v1"].inference_component_name
    assert {name.split("/")[0] for name in alarms_by_name(template_of(endpoint))} == {component}


def test_sns_topic_gets_alarm_and_ok_actions():
    stack = new_stack()
    topic = sns.Topic.from_topic_arn(stack, "Pager", "arn:aws:sns:us-east-1:123456789012:pager")
    endpoint = endpoint_with(stack=stack, alarms=MonitoringAlarms(topic=topic, adapter_names=["support-de-v1"]))
    for name, alarm in alarms_by_name(template_of(endpoint)).items():
        assert alarm["AlarmActions"] == ["arn:aws:sns:us-east-1:123456789012:pager"], name
        assert alarm["OKActions"] == ["arn:aws:sns:us-east-1:123456789012:pager"], name


def test_adapter_alarms_live_in_the_adapters_shard_and_change_no_other_resource():
    def build(with_alarms: bool):
        stack = cdk.Stack(cdk.App(), "Alarm-Shards")
        endpoint = endpoint_with(stack=stack, placement=FleetPlacement(), alarms=MonitoringAlarms(endpoint=None))
        if with_alarms:
            endpoint.add_adapter_alarms("support-en-v1")
        return endpoint

    plain, alarmed = build(False), build(True)
    shard = alarmed.fleet.stack_of("support-en-v1")
    for alarm in alarmed.monitoring.adapter_alarms["support-en-v1"].values():
        assert cdk.Stack.of(alarm) is shard
    other = alarmed.fleet.stack_of("support-de-v1")
    assert other is not shard, "the two adapters hash to different shards"
    assert Template.from_stack(other).to_json() == Template.from_stack(plain.fleet.stack_of("support-de-v1")).to_json()
    before = Template.from_stack(plain.fleet.stack_of("support-en-v1")).to_json()["Resources"]
    after = Template.from_stack(shard).to_json()["Resources"]
    assert {key: value for key, value in after.items() if key in before} == before
    assert [value["Type"] for key, value in after.items() if key not in before] == ["AWS::CloudWatch::Alarm"] * 3


def refused(endpoint, adapter, overrides=None) -> str:
    count = own_resource_count(cdk.Stack.of(endpoint))
    with pytest.raises(ConfigurationError) as raised:
        endpoint.add_adapter_alarms(adapter, overrides)
    assert own_resource_count(cdk.Stack.of(endpoint)) == count, "nothing was created"
    return str(raised.value)


def test_alarms_on_an_adapter_that_does_not_exist_are_refused():
    endpoint = endpoint_with(alarms=MonitoringAlarms())
    assert "adapter 'invoices-v1' of MultiAdapterEndpoint" in refused(endpoint, "invoices-v1")
    assert "alarms: is not an adapter of this endpoint; add the adapter before its alarms" in refused(endpoint, "invoices-v1")


def test_opting_in_a_missing_adapter_by_name_fails_synth_naming_it():
    endpoint = endpoint_with(alarms=MonitoringAlarms(adapter_names=["support-en-v1", "invoices-v1"]))
    with refused_at_synth("alarms.adapter_names: 'invoices-v1' is not an adapter of this endpoint", construct=endpoint.node.path):
        Template.from_stack(cdk.Stack.of(endpoint))


def test_unknown_settings_bad_thresholds_and_unpublished_metrics_are_refused():
    endpoint = endpoint_with(
        alarms=MonitoringAlarms(endpoint=None), request_metrics=RequestMetrics(metrics=("Latency", "Errors5XX"))
    )
    unknown = refused(endpoint, "support-en-v1", {"latency_p99_ms": 100, "error_rate": 2})
    assert "alarms.error_rate: is not an alarm setting; known: error_rate_percent" in unknown
    assert "alarms.latency_p99_ms: is not an alarm setting" in unknown
    bad = refused(endpoint, "support-en-v1", {"error_rate_percent": 150, "latency_p95_ms": -1, "datapoints_to_alarm": 5})
    assert "alarms.error_rate_percent: must be a percentage above 0 and below 100" in bad
    assert "alarms.latency_p95_ms: must be a positive number of milliseconds" in bad
    assert "alarms.datapoints_to_alarm: (5) must not exceed evaluation_periods (3)" in bad
    cold = refused(endpoint, "support-en-v1")
    assert "alarms: needs metric 'ColdStarts', which is not published: request_metrics.metrics leaves it out" in cold


def test_alarms_need_the_endpoint_alarm_settings_and_come_once():
    assert "needs the endpoint's alarms on" in refused(endpoint_with(), "support-en-v1")
    endpoint = endpoint_with(alarms=MonitoringAlarms(endpoint=None))
    endpoint.add_adapter_alarms("support-en-v1")
    assert "alarms: are already added" in refused(endpoint, "SUPPORT-EN-V1")


def test_endpoint_alarms_on_metrics_that_are_not_published_are_refused():
    with pytest.raises(ConfigurationError, match=r"alarms.endpoint: needs metric 'Latency', which is not published: EMF is off"):
        endpoint_with(request_metrics=RequestMetrics(emf=False), alarms=MonitoringAlarms())


def test_alarms_past_the_shards_capacity_are_refused_before_anything_is_created():
    endpoint = endpoint_with(
        adapters=("a-v1", "b-v1"),
        placement=FleetPlacement(shards=1, shard_capacity=5),
        alarms=MonitoringAlarms(endpoint=None),
    )
    endpoint.add_adapter_alarms("a-v1")  # 2 components + 3 alarms = 5: full
    shard = endpoint.fleet.stack_of("b-v1")
    held = own_resource_count(shard)
    with pytest.raises(ConfigurationError) as raised:
        endpoint.add_adapter_alarms("b-v1", {"latency_p95_ms": None, "cold_start_share_percent": None})
    assert "3 alarm(s)" not in str(raised.value)
    assert "1 alarm(s) would put its shard (Shard0) at 6 resources, over its capacity of 5" in str(raised.value)
    assert own_resource_count(shard) == held


def test_an_adapter_opted_in_by_name_that_would_overflow_its_shard_is_not_created():
    endpoint = endpoint_with(
        adapters=("a-v1",),
        placement=FleetPlacement(shards=1, shard_capacity=5),
        alarms=MonitoringAlarms(endpoint=None, adapter_names=["a-v1", "b-v1"]),
    )
    with pytest.raises(ConfigurationError) as raised:
        endpoint.add_adapter("b-v1", artifact=artifact("b-v1"))
    assert "alarms: its component and 3 alarm(s) would put its shard (Shard0) at 8 resources, over its capacity of 5" in str(
        raised.value
    )
    assert "b-v1" not in endpoint.adapters
    assert own_resource_count(endpoint.fleet.stack_of("a-v1")) == 4


def test_alarms_without_a_topic_acknowledge_only_the_alarm_action_rules():
    from cdk_adapters.private.nag_acknowledgments import ALARM_ACTION_RULES
    from tests.constructs.test_nag_lint_composition import nag_violations

    endpoint = endpoint_with(alarms=MonitoringAlarms(adapter_names=["support-en-v1"]))
    acknowledged = set()
    for alarm in [*endpoint.endpoint_alarms.values(), *endpoint.monitoring.adapter_alarms["support-en-v1"].values()]:
        for entry in alarm.node.metadata:
            if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                acknowledged |= set(entry.data)
    assert {key.split("::")[-1] for key in acknowledged} == set(ALARM_ACTION_RULES)
    assert nag_violations(cdk.Stack.of(endpoint)) == []
    stack = new_stack("With-Topic")
    topic = sns.Topic.from_topic_arn(stack, "Pager", "arn:aws:sns:us-east-1:123456789012:pager")
    with_topic = endpoint_with(stack=stack, alarms=MonitoringAlarms(topic=topic, adapter_names=["support-en-v1"]))
    assert not any(
        entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
        for alarm in with_topic.endpoint_alarms.values()
        for entry in alarm.node.metadata
    )
    assert nag_violations(stack) == []


def test_a_smaller_metric_set_with_the_matching_alarms_turned_off_builds():
    endpoint = endpoint_with(
        request_metrics=RequestMetrics(metrics=("Latency", "Errors5XX")),
        alarms=MonitoringAlarms(
            endpoint=AlarmThresholds(cold_start_share_percent=None), adapters=AlarmThresholds(cold_start_share_percent=None)
        ),
    )
    assert set(endpoint.endpoint_alarms) == {"error_rate", "latency_p95"}
    assert set(endpoint.add_adapter_alarms("support-en-v1")) == {"error_rate", "latency_p95"}


def test_adapters_without_alarms_cannot_overflow_a_shard_that_alarms_filled():
    """One count per shard covers components and alarms: an adapter with no alarms of its own is
    refused (naming it and the field) once another adapter's alarms filled the shard."""
    from cdk_adapters.artifacts.artifact import AdapterArtifact
    from cdk_adapters.endpoint.fleet import FleetPlacement
    from cdk_adapters.monitoring.alarms import MonitoringAlarms
    from cdk_adapters.problems import ConfigurationError
    from tests.constructs.conftest import build_endpoint

    endpoint = build_endpoint(placement=FleetPlacement(shards=1, shard_capacity=5), alarms=MonitoringAlarms())
    url = "s3://example-adapters/{}/adapter.tar.gz"
    endpoint.add_adapter("a-v1", artifact=AdapterArtifact.from_s3_url(url.format("a-v1")))
    endpoint.add_adapter_alarms("a-v1")  # 1 component + 3 alarms
    endpoint.add_adapter("b-v1", artifact=AdapterArtifact.from_s3_url(url.format("b-v1")))  # 5 of 5
    with pytest.raises(ConfigurationError) as raised:
        endpoint.add_adapter("c-v1", artifact=AdapterArtifact.from_s3_url(url.format("c-v1")))
    [problem] = raised.value.problems
    assert (problem.subject, problem.field) == ("adapter 'c-v1' of MultiAdapterEndpoint 'Test-Stack/Serving'", "placement")
    assert "would put its shard (Shard0) at 6 resources, over its capacity of 5" in problem.message
    assert sorted(endpoint.adapters) == ["a-v1", "b-v1"]


def test_throttled_and_starved_alarms_are_off_by_default_and_watch_the_fair_share_metrics_when_on():
    assert AlarmThresholds().enabled == ("error_rate", "latency_p95", "cold_start_share")
    endpoint = endpoint_with(
        alarms=MonitoringAlarms(
            endpoint=AlarmThresholds(throttled_share_percent=2),
            adapters=AlarmThresholds(error_rate_percent=None, latency_p95_ms=None, cold_start_share_percent=None),
        )
    )
    created = endpoint.add_adapter_alarms("support-en-v1", {"throttled_share_percent": 10, "queue_wait_p95_ms": 2000})
    assert set(created) == {"throttled_share", "queue_wait_p95"}
    alarms = alarms_by_name(template_of(endpoint))
    prefix, component = endpoint.prefix, endpoint.adapters["support-en-v1"].inference_component_name
    assert set(endpoint.endpoint_alarms) == {"error_rate", "latency_p95", "cold_start_share", "throttled_share"}
    endpoint_throttled = alarms[f"{prefix}/throttled-share"]
    assert (endpoint_throttled["MetricName"], endpoint_throttled["Statistic"], endpoint_throttled["Threshold"]) == (
        "Throttled",
        "Average",
        0.02,
    )
    assert endpoint_throttled["Dimensions"] == [{"Name": "EndpointName", "Value": endpoint.endpoint_name}]
    throttled, starved = alarms[f"{component}/throttled-share"], alarms[f"{component}/queue-wait-p95"]
    assert (throttled["MetricName"], throttled["Statistic"], throttled["Threshold"]) == ("Throttled", "Average", 0.1)
    assert (starved["MetricName"], starved["ExtendedStatistic"], starved["Threshold"]) == ("QueueWait", "p95", 2000)
    assert "Raise its weight or max_queue, add copies, or give the tenant its own endpoint" in throttled["AlarmDescription"]
    assert {entry["Name"] for entry in starved["Dimensions"]} == {"Adapter", "EndpointName"}


def test_starved_alarms_need_fair_share_and_bad_thresholds_are_refused():
    endpoint = endpoint_with(alarms=MonitoringAlarms(endpoint=None), fair_share=False)
    text = refused(endpoint, "support-en-v1", {"queue_wait_p95_ms": 500})
    assert "alarms: queue_wait_p95 needs fair share on (fair_share=True)" in text
    with pytest.raises(ConfigurationError) as raised:
        endpoint_with(alarms=MonitoringAlarms(endpoint=AlarmThresholds(throttled_share_percent=100, queue_wait_p95_ms=0)))
    assert "alarms.endpoint.throttled_share_percent: must be a percentage above 0 and below 100" in str(raised.value)
    assert "alarms.endpoint.queue_wait_p95_ms: must be a positive number of milliseconds" in str(raised.value)
