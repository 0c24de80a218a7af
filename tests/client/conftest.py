from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from cdk_adapters.contract.discovery import DiscoveryRecord

RECORD = DiscoveryRecord(
    endpoint_name="support-endpoint",
    base_inference_component_name="support-endpoint-base",
    component_prefix="support-endpoint",
    aliases={"support-en": {"support-en-v4": 90, "support-en-v5": 10}},
)


def runtime_client():
    return boto3.client(
        "sagemaker-runtime", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test"
    )


@pytest.fixture
def runtime():
    client = runtime_client()
    with Stubber(client) as stubber:
        client.stubber = stubber
        yield client
        stubber.assert_no_pending_responses()


class FakeClock:
    """A clock that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
