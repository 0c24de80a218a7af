"""Capture records go to the capture log group, one stream per adapter, through the real middleware
and a real CloudWatch Logs client (moto's CloudWatch Logs; botocore's Stubber for failures).

What is asserted is what a reader of one adapter's stream gets back (`GetLogEvents`, the one read
`grant_read_capture` gives): that adapter's records, under whichever name SageMaker sent, and no
other tenant's; and that CloudWatch refusing the writes never reaches a caller.
"""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from adapter_server.capture_log import (
    MAX_BATCH_BYTES,
    CloudWatchCaptureLog,
    StandardOutputCaptureLog,
    _chunks,
    capture_log_for,
)
from adapter_server.settings import ServingSettings
from cdk_adapters.contract import capture_record
from cdk_adapters.contract.capture_record import CapturePolicy, CaptureSettings
from cdk_adapters.contract.runtime_api import ADAPTER_IDENTIFIER_HEADER
from tests.container.test_middleware_asgi import PREFIX, call, completion, middleware

REGION = "eu-west-1"
GROUP = "/cdk-adapters/capture/tenants-0a1b2c3d"
GROUP_ARN = f"arn:aws:logs:{REGION}:123456789012:log-group:{GROUP}"


def records_in(client, stream: str) -> list[dict]:
    events = client.get_log_events(logGroupName=GROUP, logStreamName=stream, startFromHead=True)["events"]
    return [json.loads(event["message"]) for event in events]


@pytest.fixture
def logs_client():
    with mock_aws():
        client = boto3.client("logs", region_name=REGION)
        client.create_log_group(logGroupName=GROUP)
        yield client


def test_each_adapters_records_are_in_its_own_stream_whichever_name_was_sent(logs_client, capsys):
    mw, _ = middleware(registered=("acme-v1", "beta-v1"), capture=CapturePolicy(default=CaptureSettings()))
    log = CloudWatchCaptureLog(GROUP, logs_client, flush_interval_s=0.01)
    mw.context.capture_log = log
    for header, prompt in ((f"{PREFIX}-acme-v1", "acme secret"), ("beta-v1", "beta secret"), ("ACME-v1", "acme again")):
        status, _ = call(
            mw,
            "POST",
            "/invocations",
            body=json.dumps({"prompt": prompt, "max_tokens": 2}).encode(),
            headers={ADAPTER_IDENTIFIER_HEADER: header},
        )
        assert status == 200
    log.close()
    acme, beta = records_in(logs_client, "acme-v1"), records_in(logs_client, "beta-v1")
    assert [(r["adapter"], r["case"]["prompt"]) for r in acme] == [("acme-v1", "acme secret"), ("acme-v1", "acme again")]
    assert [(r["adapter"], r["case"]["prompt"]) for r in beta] == [("beta-v1", "beta secret")]
    streams = {s["logStreamName"] for s in logs_client.describe_log_streams(logGroupName=GROUP)["logStreams"]}
    assert streams == {"acme-v1", "beta-v1"}
    # Nothing of a tenant's prompt goes to standard output (the base component's shared group).
    assert "secret" not in capsys.readouterr().out
    assert log.dropped == 0


def test_records_read_back_are_the_contracts_records(logs_client):
    """`eval --from-capture` reads the same records back from a stream's events."""
    mw, _ = middleware(capture=CapturePolicy(default=CaptureSettings(redact=("response",))))
    log = CloudWatchCaptureLog(GROUP, logs_client, flush_interval_s=0.01)
    mw.context.capture_log = log
    call(mw, "POST", "/invocations", body=completion(), headers={ADAPTER_IDENTIFIER_HEADER: "acme-v1"})
    log.close()
    [event] = logs_client.get_log_events(logGroupName=GROUP, logStreamName="acme-v1", startFromHead=True)["events"]
    record, problem = capture_record.decode_line(event["message"])
    assert problem is None
    assert record.adapter == "acme-v1" and record.response == capture_record.REDACTED


def test_a_cloudwatch_failure_drops_records_and_says_so_once_but_every_caller_is_answered(capsys):
    client = boto3.client("logs", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(client)
    stubber.add_response("create_log_stream", {}, {"logGroupName": GROUP, "logStreamName": "acme-v1"})
    for _ in range(3):
        stubber.add_client_error("put_log_events", "AccessDeniedException", http_status_code=400)
    stubber.activate()
    mw, _ = middleware(capture=CapturePolicy(default=CaptureSettings()))
    log = CloudWatchCaptureLog(GROUP, client, flush_interval_s=0)
    mw.context.capture_log = log
    for _ in range(3):
        status, _ = call(mw, "POST", "/invocations", body=completion(), headers={ADAPTER_IDENTIFIER_HEADER: "acme-v1"})
        assert status == 200
    log.close()
    assert log.dropped == 3
    dropped_lines = [line for line in capsys.readouterr().out.splitlines() if "capture_dropped" in line]
    assert len(dropped_lines) == 1 and "AccessDeniedException" in dropped_lines[0]


def test_an_existing_stream_is_written_not_refused(logs_client):
    logs_client.create_log_stream(logGroupName=GROUP, logStreamName="acme-v1")
    log = CloudWatchCaptureLog(GROUP, logs_client, flush_interval_s=0)
    log.write("acme-v1", '{"x": 1}')
    log.close()
    assert records_in(logs_client, "acme-v1") == [{"x": 1}]
    assert log.dropped == 0


def test_a_batch_stays_within_put_log_events_limits():
    line = "x" * 100_000
    chunks = _chunks([(index, line) for index in range(25)])
    assert all(sum(len(message) + 26 for _, message in chunk) <= MAX_BATCH_BYTES for chunk in chunks)
    assert sum(len(chunk) for chunk in chunks) == 25 and len(chunks) == 3


def test_the_settings_choose_the_sink_and_refuse_a_malformed_group():
    settings, problems = ServingSettings.from_environ({capture_record.CAPTURE_LOG_GROUP_ENV: GROUP_ARN})
    assert problems == [] and settings.capture_log_group_arn == GROUP_ARN
    regions = []
    sink = capture_log_for(GROUP_ARN, lambda region: regions.append(region) or object())
    assert isinstance(sink, CloudWatchCaptureLog) and sink.group == GROUP and regions == [REGION]
    sink.close()
    assert isinstance(capture_log_for(None), StandardOutputCaptureLog)
    _, problems = ServingSettings.from_environ({capture_record.CAPTURE_LOG_GROUP_ENV: GROUP})
    assert [p.subject for p in problems] == [capture_record.CAPTURE_LOG_GROUP_ENV]
