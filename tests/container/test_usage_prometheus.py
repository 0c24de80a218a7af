"""``cdk-adapters usage --prometheus`` against the shared real server's ``/metrics`` after real requests.

The counters are the whole session's, so the test reads them before and after its own requests and
compares the difference with what the answers themselves said (their ``usage``).
"""

from __future__ import annotations

import io
import json

import pytest

from cdk_adapters.cli import main, usage
from cdk_adapters.usage.report import AdapterUsage
from tests.container.sagemaker_calls import CUSTOM_ATTRIBUTES_HEADER, completion_body, invoke, register, server_sent_events

pytestmark = pytest.mark.vllm

ADAPTER = "usage-v1"


def figures(url: str) -> dict[str, AdapterUsage]:
    return {row.adapter: row for row in usage.read_prometheus(f"{url}/metrics")}


def test_usage_reads_local_metrics_per_adapter_after_real_requests(served, zoo):
    client = served.client
    assert register(client, ADAPTER, zoo.adapter("good")).status_code == 200
    before = figures(served.url).get(ADAPTER, AdapterUsage(ADAPTER))

    answers = [invoke(client, ADAPTER), invoke(client, ADAPTER, completion_body(max_tokens=5))]
    stream = invoke(client, ADAPTER, completion_body(stream=True, stream_options={"include_usage": True}))
    refused = invoke(client, ADAPTER, **{CUSTOM_ATTRIBUTES_HEADER: "route=/v1/load_lora_adapter"})
    assert [answer.status_code for answer in (*answers, stream, refused)] == [200, 200, 200, 400]
    told = [answer.json()["usage"] for answer in answers] + [server_sent_events(stream)[-2]["usage"]]

    after = figures(served.url)[ADAPTER]
    assert after.requests - before.requests == 4
    assert after.output_tokens - before.output_tokens == sum(u["completion_tokens"] for u in told)
    assert after.input_tokens - before.input_tokens == sum(u["prompt_tokens"] for u in told)
    assert (after.errors_4xx - before.errors_4xx, after.errors_5xx - before.errors_5xx) == (1, 0)
    assert after.throttled == before.throttled  # nothing of this adapter was over a limit

    # The command itself, as a tenant report: the table and the JSON with a cost split.
    out, err = io.StringIO(), io.StringIO()
    assert (
        main(
            ["usage", "--prometheus", served.url, "--instance-type", "ml.g5.xlarge", "--instance-hours", "1"],
            stdout=out,
            stderr=err,
        )
        == 0
    ), err.getvalue()
    print(f"\ncdk-adapters usage --prometheus {served.url} --instance-type ml.g5.xlarge --instance-hours 1\n{out.getvalue()}")
    assert out.getvalue().startswith(f"Prometheus {served.url}, totals since the server started")
    assert any(line.split()[:1] == [ADAPTER] for line in out.getvalue().splitlines())
    document_out = io.StringIO()
    assert (
        main(
            ["usage", "--prometheus", served.url, "--json", "--instance-type", "ml.g5.xlarge", "--instance-hours", "1"],
            stdout=document_out,
            stderr=io.StringIO(),
        )
        == 0
    )
    document = json.loads(document_out.getvalue())
    rows = {row["adapter"]: row for row in document["adapters"]}
    assert rows[ADAPTER]["output_tokens"] == after.output_tokens
    assert document["cost"]["total_usd"] == 1.41 and round(sum(row["cost_share"] for row in rows.values()), 6) == 1.0
