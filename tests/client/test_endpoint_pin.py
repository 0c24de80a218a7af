"""`accept_endpoints`: a client refuses a discovery record that names an endpoint it was not told to accept.

Whoever can write the SSM parameter decides where every call (and its prompt) goes; a pinned client
raises `UnexpectedEndpoint` instead, before anything is sent. SSM and sagemaker-runtime are botocore
Stubbers: the runtime Stubber has no responses queued, so any call would fail the test.
"""

from __future__ import annotations

import pytest
from botocore.stub import Stubber

from cdk_adapters.client import AdapterClient, DiscoveryError, UnexpectedEndpoint
from cdk_adapters.contract.discovery import CanaryRecord, DiscoveryRecord
from tests.client.conftest import RECORD
from tests.client.test_client_stubbed import ANSWER, body_of, expected_call, ssm_client

ELSEWHERE = DiscoveryRecord("attacker-endpoint", "attacker-endpoint-base", "attacker-endpoint")


def parameter(stubber: Stubber, record: DiscoveryRecord) -> None:
    stubber.add_response("get_parameter", {"Parameter": {"Name": "/p", "Value": record.to_json()}}, {"Name": "/p"})


def test_a_record_naming_another_endpoint_is_refused_before_anything_is_sent(runtime):
    ssm = ssm_client()
    with Stubber(ssm) as stubber:
        parameter(stubber, ELSEWHERE)
        with pytest.raises(UnexpectedEndpoint) as refused:
            AdapterClient.from_parameter("/p", ssm=ssm, runtime=runtime, accept_endpoints=["support-endpoint"])
    assert isinstance(refused.value, DiscoveryError)
    assert refused.value.endpoint_name == "attacker-endpoint"
    assert str(refused.value) == (
        "the discovery record names endpoint 'attacker-endpoint', which this client does not accept "
        "(accept_endpoints=['support-endpoint']); nothing was sent"
    )


def test_an_exact_name_or_a_prefix_accepts_the_record_and_calls_go_out(runtime):
    AdapterClient.from_record(RECORD, runtime=runtime, accept_endpoints="support-endpoint")
    client = AdapterClient.from_record(RECORD, runtime=runtime, accept_endpoints=["other", "support-*"])
    runtime.stubber.add_response(
        "invoke_endpoint",
        {"Body": body_of(ANSWER)},
        expected_call("support-endpoint-support-en-v4", "/v1/completions", {"max_tokens": 16, "prompt": "x"}),
    )
    assert client.invoke("support-en-v4", "x", max_tokens=16).text == " thirty days"
    with pytest.raises(UnexpectedEndpoint):
        AdapterClient.from_record(RECORD, runtime=runtime, accept_endpoints=["support-endpoint-*"])  # prefix, not the name


def test_the_canary_endpoint_must_be_accepted_too(runtime):
    canary = CanaryRecord("support-canary", "support-canary-base", "support-canary", ("support-en-v4",), 10)
    record = DiscoveryRecord("support-endpoint", "support-endpoint-base", "support-endpoint", canary=canary)
    with pytest.raises(UnexpectedEndpoint, match="names endpoint 'support-canary'"):
        AdapterClient.from_record(record, runtime=runtime, accept_endpoints=["support-endpoint"])
    AdapterClient.from_record(record, runtime=runtime, accept_endpoints=["support-endpoint", "support-canary"])


def test_a_re_read_record_that_moves_the_endpoint_stops_calls_until_it_is_put_right(runtime, clock):
    ssm = ssm_client()
    with Stubber(ssm) as stubber:
        parameter(stubber, RECORD)
        parameter(stubber, ELSEWHERE)
        parameter(stubber, ELSEWHERE)  # re-read on the next call, not after another maximum age
        parameter(stubber, RECORD)
        client = AdapterClient.from_parameter(
            "/p",
            ssm=ssm,
            runtime=runtime,
            clock=clock,
            sleep=clock.sleep,
            record_max_age_s=60,
            accept_endpoints=["support-endpoint"],
        )
        clock.now += 61
        for _ in range(2):
            with pytest.raises(UnexpectedEndpoint, match="the re-read discovery record names endpoint 'attacker-endpoint'"):
                client.invoke("support-en-v4", "x")
        assert client.record == RECORD
        assert client.resolve("support-en-v4").endpoint_name == "support-endpoint"
        stubber.assert_no_pending_responses()


@pytest.mark.parametrize("accept", [[], ["*"], ["prod-*-chat"], [""]])
def test_malformed_patterns_are_refused(accept, runtime):
    with pytest.raises(ValueError, match="accept_endpoints must be endpoint names or prefixes ending in one"):
        AdapterClient.from_record(RECORD, runtime=runtime, accept_endpoints=accept)
