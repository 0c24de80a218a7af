"""``cdk-adapters usage`` against `cdk-adapters local`, as the README shows it: the front's ``/metrics``.

The session's local-mode server is shared, so the test reads the counters before and after its own
calls (plain boto3 through the SageMaker Runtime front) and compares the difference with what the
answers themselves said (their ``usage``).
"""

from __future__ import annotations

import json

import boto3
import pytest

from tests.local.conftest import cli, usage_rows

pytestmark = pytest.mark.vllm

ADAPTER = "support-en-v1"
BODY = {"prompt": "Invoices are due", "max_tokens": 5, "temperature": 0, "ignore_eos": True}


def test_usage_reads_local_mode_metrics_at_the_address_it_serves(local_mode):
    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=local_mode.url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    before = usage_rows(local_mode.url).get(ADAPTER, {"requests": 0, "input_tokens": 0, "output_tokens": 0, "throttled": 0})

    told = []
    for max_tokens in (5, 3):
        answer = runtime.invoke_endpoint(
            EndpointName="local",
            InferenceComponentName=f"local-{ADAPTER}",
            ContentType="application/json",
            Body=json.dumps({**BODY, "max_tokens": max_tokens}),
        )
        told.append(json.loads(answer["Body"].read())["usage"])

    after = usage_rows(local_mode.url)[ADAPTER]
    assert after["requests"] - before["requests"] == 2
    assert after["output_tokens"] - before["output_tokens"] == sum(u["completion_tokens"] for u in told) == 8
    assert after["input_tokens"] - before["input_tokens"] == sum(u["prompt_tokens"] for u in told)
    assert after["throttled"] == before["throttled"]

    table = cli("usage", "--prometheus", f"{local_mode.url}/metrics", "--instance-type", "ml.g5.xlarge", "--instance-hours", "1")
    assert table.returncode == 0, table.stderr
    print(
        f"\n$ cdk-adapters usage --prometheus {local_mode.url}/metrics --instance-type ml.g5.xlarge --instance-hours 1\n{table.stdout}"
    )
    assert table.stdout.startswith(f"Prometheus {local_mode.url}/metrics, totals since the server started")
    assert any(line.split()[:2] == [ADAPTER, str(after["requests"])] for line in table.stdout.splitlines())
