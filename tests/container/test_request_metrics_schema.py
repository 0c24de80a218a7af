"""The request-metrics contract: its schema within EMF's limits, the environment codec both ways,
bad settings refused with every problem named, and the container's line for each setting.

The lines of a real server are checked in test_serving_metrics.py; here the container's renderer
gets records the way the invocation handler fills them in.
"""

from __future__ import annotations

import json
import re

import pytest

from adapter_server.launch import resolve_launch
from adapter_server.observability import RequestLog, RequestRecord
from adapter_server.settings import ServingSettings
from cdk_adapters.contract import request_metrics as rm
from cdk_adapters.problems import ConfigurationError
from tests.container.emf_rules import CLOUDWATCH_UNITS, declared_metrics, emf_problems


def _served(**overrides) -> RequestRecord:
    values = {
        "adapter": "tenant-a-v1",
        "route": "/invocations",
        "stream": False,
        "status": 200,
        "latency_ms": 153.8,
        "ttft_ms": 38.0,
        "prompt_tokens": 7,
        "output_tokens": 8,
        "cold": True,
        "queue_ms": 12.5,
        "in_flight": 3,
    }
    values.update(overrides)
    return RequestRecord(**values)


def _refused_404() -> RequestRecord:
    return RequestRecord(
        adapter="nobody-v1",
        route="/invocations",
        stream=False,
        status=404,
        latency_ms=0.4,
        error="adapter 'nobody-v1' is not registered on this endpoint",
    )


# ------------------------------------------------------------------------------------- schema


def test_the_schema_stays_within_emf_and_cloudwatch_limits():
    assert len(rm.METRICS) <= rm.EMF_MAX_METRICS_PER_DIRECTIVE
    assert len({spec.name for spec in rm.METRICS}) == len(rm.METRICS)
    assert all(len(dimension_set) <= rm.EMF_MAX_DIMENSIONS_PER_SET for dimension_set in rm.DIMENSION_SETS)
    assert all(spec.unit in CLOUDWATCH_UNITS for spec in rm.METRICS)
    # Metric and dimension members must not collide with the log fields they sit beside at the root.
    members = [spec.name for spec in rm.METRICS] + [rm.ENDPOINT_DIMENSION, rm.ADAPTER_DIMENSION]
    assert not set(members) & set(rm.LOG_FIELDS) and len(set(members)) == len(members)
    # The construct refuses user variables with our prefix, so these cannot be overridden by accident.
    assert all(name.startswith("CDK_ADAPTERS_") for name in rm.ENVIRONMENT_VARIABLES)


def test_error_and_cold_counts_are_always_there_so_their_average_is_a_share():
    assert rm.metric_values({rm.STATUS: 503, rm.LATENCY_MS: 2.0}) == {
        "Latency": 2.0,
        "Errors4XX": 0,
        "Errors5XX": 1,
        "ColdStarts": 0,
        "Throttled": 0,
    }
    assert rm.metric_values({rm.STATUS: 413, rm.COLD: None})["Errors4XX"] == 1
    served = rm.metric_values(_served().fields())
    assert served == {
        "Latency": 153.8,
        "TimeToFirstToken": 38.0,
        "PromptTokens": 7,
        "OutputTokens": 8,
        "Errors4XX": 0,
        "Errors5XX": 0,
        "ColdStarts": 1,
        "QueueWait": 12.5,
        "Throttled": 0,
        "InFlight": 3,
    }
    # Without fair share nothing waited for a place: no queue wait or in-flight, never a 0 that is not a measurement.
    unqueued = rm.metric_values(_served(queue_ms=None, in_flight=None).fields())
    assert "QueueWait" not in unqueued and "InFlight" not in unqueued


def test_a_throttled_request_counts_once_as_throttled_and_as_a_client_error():
    throttled = _served(
        status=429,
        latency_ms=0.3,
        ttft_ms=None,
        prompt_tokens=None,
        output_tokens=None,
        queue_ms=None,
        in_flight=None,
        error="adapter 'tenant-a-v1' is over its max_queue limit",
    )
    values = rm.metric_values(throttled.fields())
    assert (values["Throttled"], values["Errors4XX"], values["Errors5XX"]) == (1, 1, 0)
    assert rm.metric_values(_served(status=404).fields())["Throttled"] == 0


# ---------------------------------------------------------------------------------- the codec


def test_environment_round_trips_through_the_container_decoder():
    env = rm.environment(namespace="Acme/Serving", metrics=["Errors5XX", "Latency"], endpoint_name="prod-ep")
    assert env == {
        rm.EMF_ENV: "true",
        rm.NAMESPACE_ENV: "Acme/Serving",
        rm.METRICS_ENV: "Errors5XX,Latency",
        rm.ENDPOINT_NAME_ENV: "prod-ep",
    }
    settings = rm.from_environment(env)
    assert settings == rm.RequestMetricsSettings(
        emf=True, namespace="Acme/Serving", metrics=(rm.LATENCY, rm.ERRORS_5XX), endpoint_name="prod-ep"
    )
    assert rm.from_environment(rm.environment(emf=False)).emf is False
    assert rm.environment(metrics=(spec.name for spec in rm.METRICS[:2]))[rm.METRICS_ENV] == "Latency,TimeToFirstToken"
    # Nothing set: every metric, the default namespace, and the local endpoint name.
    assert rm.from_environment({}) == rm.RequestMetricsSettings()
    assert rm.from_environment(rm.environment()).metrics == rm.METRICS


def test_unknown_metric_names_are_refused_with_the_known_names_and_a_suggestion():
    with pytest.raises(ConfigurationError) as raised:
        rm.environment(metrics=["latency", "Errs5XX", "Latency", "Latency"], subject="endpoint 'prod'")
    assert [(p.subject, p.field) for p in raised.value.problems] == [("endpoint 'prod'", "metrics")] * 3
    message = str(raised.value)
    assert "unknown metric 'latency' (did you mean 'Latency'?)" in message
    assert "unknown metric 'Errs5XX' (did you mean 'Errors5XX'?)" in message
    assert "'Latency' is listed twice" in message
    assert "known: Latency, TimeToFirstToken, PromptTokens, OutputTokens, Errors4XX, Errors5XX, ColdStarts" in message


def test_the_container_names_the_variable_of_every_bad_setting(tmp_path):
    _, problems = rm.decode(
        {
            rm.METRICS_ENV: "Latency, ColdStart",
            rm.EMF_ENV: "on",
            rm.NAMESPACE_ENV: "AWS/SageMaker",
            rm.ENDPOINT_NAME_ENV: "prod\u00e9",
        }
    )
    assert [p.subject for p in problems] == [rm.EMF_ENV, rm.NAMESPACE_ENV, rm.METRICS_ENV, rm.ENDPOINT_NAME_ENV]
    assert "unknown metric 'ColdStart' (did you mean 'ColdStarts'?)" in problems[2].message
    # The launcher reports them with its other checks (exit 78) before vLLM starts.
    with pytest.raises(ConfigurationError) as raised:
        resolve_launch({rm.METRICS_ENV: "Latncy"}, python="python", no_custom_code_dir=tmp_path)
    assert (rm.METRICS_ENV, "value") in [(p.subject, p.field) for p in raised.value.problems]
    assert ServingSettings.from_environ({rm.EMF_ENV: "false"})[0].metrics.emf is False


@pytest.mark.parametrize(
    ("namespace", "complaint"),
    [
        ("AWS/SageMaker", "which AWS reserves"),
        ("", "non-empty"),
        ("x" * 256, "CloudWatch allows 255"),
        ("Café", "ASCII without control characters"),
        ("Tab\there", "ASCII without control characters"),
        (":Leading", "must not start with ':'"),
    ],
)
def test_namespace_rules(namespace, complaint):
    found = rm.problems(namespace=namespace)
    assert len(found) == 1 and found[0].field == "namespace" and complaint in found[0].message


def test_every_problem_at_once_and_no_metrics_is_not_a_way_to_turn_emf_off():
    found = rm.problems(namespace="AWS/x", metrics=[], endpoint_name=" ")
    assert [p.field for p in found] == ["namespace", "metrics", "endpoint_name"]
    assert "turn EMF off instead" in found[1].message
    assert rm.problems(metrics=[], emf=False) == []
    assert "a list of metric names" in rm.problems(metrics="Latency")[0].message
    _, problems = rm.decode({rm.METRICS_ENV: ""})
    assert [p.subject for p in problems] == [rm.METRICS_ENV] and f"set {rm.EMF_ENV}=false" in problems[0].message


def test_a_cdk_token_passes_as_the_endpoint_name():
    # The construct renders the endpoint's name as a token at synth time.
    assert rm.environment(endpoint_name="${Token[TOKEN.123]}")[rm.ENDPOINT_NAME_ENV] == "${Token[TOKEN.123]}"


# ------------------------------------------------------------------------ the container's line


def test_emf_off_is_the_plain_line_with_exactly_the_log_fields():
    line = RequestLog(rm.RequestMetricsSettings(emf=False)).line(_served().fields(), "tenant-a-v1")
    document = json.loads(line)
    assert list(document) == list(rm.LOG_FIELDS)
    assert document["event"] == rm.REQUEST_EVENT and document["latency_ms"] == 153.8 and document["cold"] is True


def test_emf_on_carries_every_enabled_metric_with_both_dimensions():
    settings = rm.RequestMetricsSettings(namespace="Acme", endpoint_name="prod-ep")
    line = RequestLog(settings).line(_served().fields(), "tenant-a-v1")
    assert emf_problems(line, namespace="Acme", endpoint_name="prod-ep") == []
    assert declared_metrics(line) == [spec.name for spec in rm.METRICS]
    document = json.loads(line)
    assert list(document)[: len(rm.LOG_FIELDS)] == list(rm.LOG_FIELDS)
    assert (document["Adapter"], document["OutputTokens"], document["ColdStarts"]) == ("tenant-a-v1", 8, 1)


def test_only_enabled_metrics_with_a_value_are_declared():
    log = RequestLog(rm.from_environment(rm.environment(metrics=["OutputTokens", "Errors4XX"], endpoint_name="e")))
    served = log.line(_served().fields(), "tenant-a-v1")
    assert declared_metrics(served) == ["OutputTokens", "Errors4XX"]
    assert "Latency" not in json.loads(served)
    refused = log.line(_refused_404().fields(), rm.UNREGISTERED_ADAPTER)
    assert emf_problems(refused, namespace=rm.DEFAULT_NAMESPACE, endpoint_name="e") == []
    assert declared_metrics(refused) == ["Errors4XX"]
    assert json.loads(refused)["Adapter"] == rm.UNREGISTERED_ADAPTER
    # A line with nothing to extract is left plain: EMF takes no directive without metrics.
    tokens_only = RequestLog(rm.from_environment({rm.METRICS_ENV: "PromptTokens"}))
    assert "_aws" not in json.loads(tokens_only.line(_refused_404().fields(), rm.UNREGISTERED_ADAPTER))


def test_the_container_line_decodes_with_the_contract_to_what_was_recorded():
    settings = rm.RequestMetricsSettings(namespace="Acme", endpoint_name="prod-ep")
    record = _served()
    decoded = rm.decode_line(RequestLog(settings).line(record.fields(), "tenant-a-v1"))
    assert decoded.fields == _served().fields()
    assert decoded.metrics == rm.metric_values(_served().fields())
    assert (decoded.metrics["QueueWait"], decoded.metrics["Throttled"], decoded.metrics["InFlight"]) == (12.5, 0, 3)
    assert decoded.dimensions == {rm.ENDPOINT_DIMENSION: "prod-ep", rm.ADAPTER_DIMENSION: "tenant-a-v1"}
    assert decoded.namespace == "Acme"
    plain = rm.decode_line(RequestLog(rm.RequestMetricsSettings(emf=False)).line(_served().fields(), "tenant-a-v1"))
    assert (plain.metrics, plain.dimensions, plain.namespace) == ({}, {}, None)
    with pytest.raises(ValueError, match=re.escape("not a cdk_adapters.request line")):
        rm.decode_line('{"event": "cdk_adapters.registration"}')
    forged = RequestLog(settings).line(_served().fields(), "tenant-a-v1").replace('"Throttled": 0', '"Throttled": "no"')
    with pytest.raises(ValueError, match="metric 'Throttled' has no number"):
        rm.decode_line(forged)
