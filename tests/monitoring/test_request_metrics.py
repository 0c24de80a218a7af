"""The container's request metrics from the construct side: the environment the model gets (through
the contract module, decoded back by the container's own decoder), and the typed metric methods."""

from __future__ import annotations

import pytest
from aws_cdk import Duration

from cdk_adapters.contract import request_metrics as contract
from cdk_adapters.monitoring import MonitoringAlarms, RequestMetrics
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import build_endpoint
from tests.monitoring.conftest import endpoint_with, resources, template_of


def model_environment(endpoint) -> dict[str, str]:
    (model,) = resources(template_of(endpoint), "AWS::SageMaker::Model").values()
    return model["Properties"]["PrimaryContainer"]["Environment"]


def test_default_settings_reach_the_container_and_decode_to_every_metric():
    endpoint = build_endpoint()
    settings = contract.from_environment(model_environment(endpoint))
    assert settings.emf is True
    assert settings.namespace == contract.DEFAULT_NAMESPACE
    assert settings.metrics == contract.METRICS
    assert settings.endpoint_name == endpoint.endpoint_name
    # The fair-share signals are on by default: the model's environment names them.
    assert model_environment(endpoint)[contract.METRICS_ENV].endswith(",QueueWait,Throttled,InFlight")


def test_namespace_metric_set_and_emf_off_are_rendered_through_the_contract():
    chosen = build_endpoint(request_metrics=RequestMetrics(namespace="Tenants/Llm", metrics=("Latency", "Errors5XX")))
    settings = contract.from_environment(model_environment(chosen))
    assert settings.namespace == "Tenants/Llm"
    assert [spec.name for spec in settings.metrics] == ["Latency", "Errors5XX"]
    off = build_endpoint(request_metrics=RequestMetrics(emf=False))
    assert contract.from_environment(model_environment(off)).emf is False


def test_adapter_metric_methods_name_the_contract_metric_and_both_dimensions():
    endpoint = endpoint_with(request_metrics=RequestMetrics(namespace="Tenants"))
    adapter = endpoint.adapters["support-en-v1"]
    expected = {
        adapter.metric_request_latency: ("Latency", "p95"),
        adapter.metric_time_to_first_token: ("TimeToFirstToken", "p95"),
        adapter.metric_prompt_tokens: ("PromptTokens", "Sum"),
        adapter.metric_output_tokens: ("OutputTokens", "Sum"),
        adapter.metric_request_errors_4xx: ("Errors4XX", "Sum"),
        adapter.metric_request_errors_5xx: ("Errors5XX", "Sum"),
        adapter.metric_cold_starts: ("ColdStarts", "Sum"),
        adapter.metric_error_rate: ("Errors5XX", "Average"),
        adapter.metric_cold_start_share: ("ColdStarts", "Average"),
        adapter.metric_queue_wait: ("QueueWait", "p95"),
        adapter.metric_throttled_requests: ("Throttled", "Sum"),
        adapter.metric_throttled_share: ("Throttled", "Average"),
        adapter.metric_in_flight: ("InFlight", "Maximum"),
    }
    # Every metric of the contract has a typed method, and the methods name nothing else.
    assert {name for name, _ in expected.values()} == set(contract.METRICS_BY_NAME)
    assert (contract.QUEUE_WAIT.statistic, contract.THROTTLED.statistic, contract.IN_FLIGHT_METRIC.statistic) == (
        "p95",
        "Sum",
        "Maximum",
    )
    for method, (name, statistic) in expected.items():
        metric = method()
        assert (metric.namespace, metric.metric_name, metric.statistic) == ("Tenants", name, statistic)
        # The Adapter dimension is the adapter key the container writes, whichever name SageMaker
        # registers it under (adapter_identity): the adapter's own name, lower-cased.
        assert metric.dimensions == {"EndpointName": endpoint.endpoint_name, "Adapter": "support-en-v1"}
        assert metric.period.to_seconds() == 300
    assert adapter.metric_request_latency(statistic="p99", period=Duration.minutes(1)).statistic == "p99"


def test_endpoint_rollup_has_only_the_endpoint_dimension():
    endpoint = build_endpoint()
    metric = endpoint.monitoring.rollup.metric_request_latency()
    assert metric.dimensions == {"EndpointName": endpoint.endpoint_name}
    assert endpoint.monitoring.rollup.metric_requests().statistic == "SampleCount"


def test_monitoring_has_one_home_and_the_endpoint_no_aliases_of_it():
    endpoint = endpoint_with(alarms=MonitoringAlarms())
    assert set(endpoint.endpoint_alarms) == {"error_rate", "latency_p95", "cold_start_share"}
    aliases = (
        "request_metrics",
        "alarms",
        "request_metric_settings",
        "alarm_settings",
        "request_metric_source",
        "adapter_alarms",
    )
    assert [name for name in aliases if hasattr(endpoint, name)] == []
    assert endpoint.monitoring.alarm_settings is not None and endpoint.monitoring.adapter_alarms == {}


def test_unknown_and_unpublished_metrics_are_refused_by_name():
    endpoint = endpoint_with(request_metrics=RequestMetrics(metrics=("Latency",)))
    adapter = endpoint.adapters["support-en-v1"]
    with pytest.raises(ConfigurationError, match=r"metric_name: unknown metric 'Latncy'; known: Latency, TimeToFirstToken"):
        adapter.request_metric_source.metric("Latncy")
    with pytest.raises(
        ConfigurationError, match=r"needs metric 'ColdStarts', which is not published: request_metrics.metrics leaves it out"
    ):
        adapter.metric_cold_start_share()
    off = endpoint_with(request_metrics=RequestMetrics(emf=False))
    with pytest.raises(ConfigurationError, match=r"EMF is off"):
        off.monitoring.rollup.metric_request_latency()


def test_bad_settings_are_refused_all_at_once_naming_the_field():
    with pytest.raises(ConfigurationError) as raised:
        build_endpoint(request_metrics=RequestMetrics(namespace="AWS/Mine", metrics=("Latncy", "Latency", "Latency")))
    text = str(raised.value)
    assert "namespace: 'AWS/Mine' starts with 'AWS/'" in text
    assert "metrics: unknown metric 'Latncy' (did you mean 'Latency'?)" in text
    assert "metrics: 'Latency' is listed twice" in text


def test_a_component_outside_an_endpoint_says_what_binds_its_metrics():
    from cdk_adapters.monitoring.metric_source import RequestMetricMethods

    with pytest.raises(ConfigurationError, match="is not served by a MultiAdapterEndpoint"):
        RequestMetricMethods().metric_request_latency()
