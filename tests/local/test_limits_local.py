"""A manifest row's ``limits:`` hold in `cdk-adapters local` as on an endpoint.

While the limited row's one place in the engine is held (a slow-reading stream straight to the
adapter server, `tests.support.held_places`), its next call is over ``max_queue: 0``: plain boto3
through the SageMaker Runtime front gets ``ModelError`` with the container's 429 inside, the
client raises `AdapterThrottled`, `usage` counts both, and another adapter keeps answering.
Waits are for state (the front's ``/metrics``), never for time.
"""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import boto3
import botocore.exceptions
import httpx
import pytest

from cdk_adapters.client import AdapterClient, AdapterThrottled, RetryPolicy
from cdk_adapters.contract import error_kinds
from tests.local.conftest import LIMITED_ADAPTER, usage_rows
from tests.support.held_places import hold, release, state, wait_for

pytestmark = pytest.mark.vllm

BODY = {"prompt": "Invoices are due", "max_tokens": 2, "temperature": 0, "ignore_eos": True}


def served(client: AdapterClient, adapter: str) -> bool:
    """`adapter` answered, as itself, with the tokens asked for (the random model's text may be empty)."""
    answer = client.invoke(adapter, BODY["prompt"], max_tokens=BODY["max_tokens"], temperature=0, ignore_eos=True)
    return answer.body["model"] == adapter and answer.usage["completion_tokens"] == BODY["max_tokens"]


def throttled_count(url: str) -> int:
    return usage_rows(url).get(LIMITED_ADAPTER, {"throttled": 0})["throttled"]


def test_a_rows_limits_throttle_its_tenant_through_the_front_and_others_keep_answering(local_mode):
    printed = local_mode.printed
    assert f"adapter '{LIMITED_ADAPTER}': InferenceComponentName=local-{LIMITED_ADAPTER}" in printed
    assert '"max_in_flight": 1, "max_queue": 0, "max_queue_wait_s": 5' in printed
    adapter_server_port = int(re.search(r"OpenAI-compatible API \(.*\): http://127\.0\.0\.1:(\d+)/v1", printed).group(1))
    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=local_mode.url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    client = AdapterClient.from_local(local_mode.url, retry=RetryPolicy(deadline_s=1))
    metrics = httpx.Client(base_url=local_mode.url, timeout=30)
    throttled_before = throttled_count(local_mode.url)

    held = hold(SimpleNamespace(port=adapter_server_port), LIMITED_ADAPTER)
    try:
        wait_for(metrics, "the held stream in the limited row's one place", lambda s: s.of(LIMITED_ADAPTER) == (1, 0))

        with pytest.raises(botocore.exceptions.ClientError) as raised:
            runtime.invoke_endpoint(
                EndpointName="local",
                InferenceComponentName=f"local-{LIMITED_ADAPTER}",
                ContentType="application/json",
                Body=json.dumps(BODY),
            )
        response = raised.value.response
        assert (response["Error"]["Code"], response["OriginalStatusCode"]) == ("ModelError", 429)
        error = json.loads(response["OriginalMessage"])["error"]
        assert (error["type"], error["adapter"], error["limit"], error["retry_after"]) == (
            error_kinds.ADAPTER_THROTTLED,
            LIMITED_ADAPTER,
            "max_queue",
            5,
        )
        assert (
            error["message"] == f"adapter '{LIMITED_ADAPTER}' is over its max_queue limit (no request may wait); retry after 5 s"
        )

        # Retry-After (5 s) is past the client's deadline (1 s): it gives up at once, typed.
        with pytest.raises(AdapterThrottled) as throttled:
            client.invoke(LIMITED_ADAPTER, BODY["prompt"], max_tokens=2)
        assert (throttled.value.adapter, throttled.value.limit, throttled.value.retry_after_s) == (
            LIMITED_ADAPTER,
            "max_queue",
            5,
        )

        assert served(client, "support-en-v1")  # another tenant is not held up
        assert state(metrics).of(LIMITED_ADAPTER) == (1, 0), "refusals change neither the engine nor the queue"
    finally:
        release(metrics, [held], (LIMITED_ADAPTER,))

    assert throttled_count(local_mode.url) - throttled_before == 2
    assert served(client, LIMITED_ADAPTER)  # its place is free again
