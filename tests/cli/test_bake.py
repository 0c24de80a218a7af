"""``cdk-adapters bake`` against botocore's Stubber (CloudWatch's DescribeAlarms and SSM's
GetParameter checked against the real service models), on a clock that moves only when it sleeps."""

from __future__ import annotations

import io

import boto3
import pytest
from botocore.stub import Stubber

from cdk_adapters.cli import main
from cdk_adapters.cli.bake import watch, wave_prefixes
from cdk_adapters.cli.common import Failure
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.contract.service_record import ServiceRecord
from tests.support.fake_clock import FakeClock

PREFIX = "chat-cell-0"


def client(service: str):
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")


def alarms(**states: str) -> dict:
    return {"MetricAlarms": [{"AlarmName": name, "StateValue": state} for name, state in states.items()]}


def expect_poll(stubber: Stubber, answer: dict, prefix: str = PREFIX) -> None:
    stubber.add_response("describe_alarms", answer, {"AlarmNamePrefix": prefix, "AlarmTypes": ["MetricAlarm"]})


def test_a_quiet_wave_passes_after_the_whole_bake_time():
    cloudwatch, clock = client("cloudwatch"), FakeClock()
    with Stubber(cloudwatch) as stubber:
        for _ in range(4):
            expect_poll(
                stubber, alarms(**{f"{PREFIX}/error-rate": "OK", f"{PREFIX}-support-v1/latency-p95": "INSUFFICIENT_DATA"})
            )
        assert watch(cloudwatch, [PREFIX], seconds=180, interval=60, out=io.StringIO(), clock=clock, sleep=clock.sleep) == []
        stubber.assert_no_pending_responses()
    assert clock.sleeps == [60, 60, 60]


def test_an_alarm_stops_the_wave_at_once_naming_it():
    cloudwatch, clock = client("cloudwatch"), FakeClock()
    with Stubber(cloudwatch) as stubber:
        expect_poll(stubber, alarms(**{f"{PREFIX}/error-rate": "OK"}))
        expect_poll(stubber, alarms(**{f"{PREFIX}/error-rate": "OK", f"{PREFIX}-support-v1/error-rate": "ALARM"}))
        fired = watch(cloudwatch, [PREFIX], seconds=3600, interval=60, out=io.StringIO(), clock=clock, sleep=clock.sleep)
        stubber.assert_no_pending_responses()  # no check after the one that found it
    assert fired == [f"{PREFIX}-support-v1/error-rate"] and clock.sleeps == [60]


def test_another_endpoint_whose_name_starts_alike_is_not_watched():
    cloudwatch, clock = client("cloudwatch"), FakeClock()
    with Stubber(cloudwatch) as stubber:
        expect_poll(stubber, alarms(**{f"{PREFIX}/error-rate": "OK", f"{PREFIX}0/error-rate": "ALARM"}))
        assert watch(cloudwatch, [PREFIX], seconds=0, interval=60, out=io.StringIO(), clock=clock, sleep=clock.sleep) == []
        expect_poll(stubber, alarms(**{f"{PREFIX}0/error-rate": "ALARM"}))
        with pytest.raises(Failure) as nothing:
            watch(cloudwatch, [PREFIX], seconds=0, interval=60, out=io.StringIO(), clock=clock, sleep=clock.sleep)
    assert "no alarm is named after chat-cell-0" in str(nothing.value.problems)


def test_the_first_waves_prefixes_come_from_the_service_record():
    record = ServiceRecord(
        {cell: DiscoveryRecord(f"chat-{cell}", f"chat-{cell}-base", f"chat-{cell}") for cell in ("cell-0", "cell-1")}
    )
    ssm = client("ssm")
    with Stubber(ssm) as stubber:
        for _ in range(2):
            stubber.add_response("get_parameter", {"Parameter": {"Value": record.to_json()}}, {"Name": "/s"})
        assert wave_prefixes(ssm, "/s", ["cell-1"]) == ["chat-cell-1"]
        with pytest.raises(Failure) as unknown:
            wave_prefixes(ssm, "/s", ["cell-7"])
    assert "'cell-7' is not a cell of the service (cell-0, cell-1)" in str(unknown.value.problems)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bake", "--endpoint", "x", "--minutes", "0"], "--minutes: must be above 0"),
        (["bake", "--minutes", "5"], "give the service record's --parameter"),
        (["bake", "--endpoint", "x", "--parameter", "/s", "--minutes", "5"], "not both"),
    ],
)
def test_usage_errors_exit_2_and_call_nothing(argv, message):
    err = io.StringIO()
    assert main(argv, stdout=io.StringIO(), stderr=err) == 2
    assert message in err.getvalue()
