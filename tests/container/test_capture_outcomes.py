"""Capture writes a record for requests that did not succeed too (429, 499, 500, 400), through the
real middleware with a recording app where vLLM stands (no server): each record names its status,
so a replay skips it and a drift check sees the failures. A sink that keeps the lines stands in
for CloudWatch (that path is test_capture_log.py's)."""

from __future__ import annotations

import asyncio
import contextlib
import json

from adapter_server.admission import FairAdmission
from cdk_adapters.contract import capture_record
from cdk_adapters.contract.capture_record import CapturePolicy, CaptureSettings
from cdk_adapters.contract.runtime_api import ADAPTER_IDENTIFIER_HEADER
from cdk_adapters.contract.tenant_limits import AdapterLimits, TenantLimits
from tests.container.test_middleware_asgi import RecordingApp, call, completion, middleware


class KeptLines:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def write(self, stream: str, line: str) -> None:
        self.lines.append((stream, line))

    def records(self) -> list[capture_record.CaptureRecord]:
        return [capture_record.decode_line(line)[0] for _, line in self.lines]


def captured(**settings) -> tuple:
    mw, app = middleware(capture=CapturePolicy(default=CaptureSettings()), **settings)
    kept = KeptLines()
    mw.context.capture_log = kept
    return mw, app, kept


def headers(adapter: str = "acme-v1") -> dict[str, str]:
    return {ADAPTER_IDENTIFIER_HEADER: adapter}


class FailingApp(RecordingApp):
    async def __call__(self, scope, receive, send) -> None:
        await receive()
        raise RuntimeError("the engine died")


def test_a_request_the_engine_fails_is_captured_with_status_500():
    mw, _, kept = captured()
    mw.app = mw.invocations._app = FailingApp()
    with contextlib.suppress(RuntimeError):
        call(mw, "POST", "/invocations", body=completion(), headers=headers())
    [record] = kept.records()
    assert (record.adapter, record.status, record.response) == ("acme-v1", 500, "")  # no answer came back
    assert record.case == {"prompt": "hi", "max_tokens": 2}


def test_a_request_over_its_sequence_limit_is_captured_with_status_400():
    mw, app, kept = captured(tenant_limits=TenantLimits(default=AdapterLimits(max_n=2)))
    status, _ = call(mw, "POST", "/invocations", body=completion(n=3), headers=headers())
    assert status == 400 and app.seen == []
    [record] = kept.records()
    assert (record.adapter, record.status) == ("acme-v1", 400)


def test_a_throttled_request_and_a_caller_who_left_while_waiting_are_captured_429_and_499():
    limits = TenantLimits(default=AdapterLimits(max_in_flight=1, max_queue=1))
    mw, _, kept = captured(tenant_limits=limits)
    release = asyncio.Event()

    class HeldApp(RecordingApp):
        async def __call__(self, scope, receive, send) -> None:
            await release.wait()
            await super().__call__(scope, receive, send)

    mw.app = mw.invocations._app = HeldApp()
    mw.context.admission = FairAdmission(4, limits.for_adapter)

    async def one(disconnect: asyncio.Event | None = None) -> int:
        sent: list[dict] = []
        body = [completion()]

        async def receive():
            if body:
                return {"type": "http.request", "body": body.pop(), "more_body": False}
            if disconnect is not None:
                await disconnect.wait()
                return {"type": "http.disconnect"}
            await asyncio.Event().wait()

        async def send(message):
            sent.append(message)

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/invocations",
            "query_string": b"",
            "server": ("0.0.0.0", 8080),
            "headers": [(ADAPTER_IDENTIFIER_HEADER.encode(), b"acme-v1")],
        }
        await mw(scope, receive, send)
        return next((m["status"] for m in sent if m["type"] == "http.response.start"), None)

    async def scenario() -> list[int]:
        running = asyncio.create_task(one())  # takes the one place, held in the engine
        await asyncio.sleep(0.05)
        leaves = asyncio.Event()
        waiting = asyncio.create_task(one(leaves))  # queued behind it (max_queue 1)
        await asyncio.sleep(0.05)
        throttled = await one()  # the queue is full: 429 at once
        leaves.set()  # the queued caller disconnects: 499, never sent
        await asyncio.sleep(0.05)
        release.set()
        return [throttled, await waiting, await running]

    statuses = asyncio.run(scenario())
    assert statuses == [429, None, 200]  # the caller who left is answered nothing
    by_status = sorted(record.status for record in kept.records())
    assert by_status == [200, 429, 499]
    assert all(stream == "acme-v1" for stream, _ in kept.lines)
    assert json.loads(kept.lines[0][1])["adapter"] == "acme-v1"
