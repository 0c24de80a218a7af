from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from cdk_adapters.contract.discovery import DiscoveryRecord
from tests.support.fake_clock import FakeClock

RECORD = DiscoveryRecord(
    endpoint_name="support-endpoint",
    base_inference_component_name="support-endpoint-base",
    component_prefix="support-endpoint",
    aliases={"support-en": {"support-en-v4": 90, "support-en-v5": 10}},
)


def runtime_client():
    return boto3.client("sagemaker-runtime", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")


@pytest.fixture
def runtime():
    client = runtime_client()
    with Stubber(client) as stubber:
        client.stubber = stubber
        yield client
        stubber.assert_no_pending_responses()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)
