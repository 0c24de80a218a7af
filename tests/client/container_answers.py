"""The container's refusals as its own code renders them, for the client tests to replay.

A stubbed ``ModelError`` carries the container's body in ``OriginalMessage``; building that body with
the container's `send_error` (and, for readiness, with `Readiness` itself) keeps the client's tests on
the shapes the container really sends instead of invented ones.
"""

from __future__ import annotations

import asyncio
import json

from adapter_server import readiness as readiness_module
from adapter_server.asgi_io import Refusal, send_error
from adapter_server.readiness import Readiness


def rendered(refusal: Refusal) -> tuple[int, dict]:
    """``(status, body)`` exactly as the container's `send_error` writes `refusal`."""
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(send_error(send, refusal))
    start, body = sent
    return start["status"], json.loads(body["body"])


def container_error(status: int, kind: str, message: str, **extra) -> dict:
    """The body of a refusal of `kind` (one of `cdk_adapters.contract.error_kinds`)."""
    answer_status, body = rendered(Refusal(status, kind, message, **extra))
    assert answer_status == status
    return body


def held_while_replaying(pending: int) -> tuple[int, dict]:
    """What an invocation gets when it waited for start-up's replay the whole time and it was still running."""

    async def hold() -> Refusal:
        readiness = Readiness()
        readiness.open()
        readiness.pending_replay = pending
        saved, readiness_module.READY_WAIT_SECONDS = readiness_module.READY_WAIT_SECONDS, 0.01  # not 50 s
        try:
            await readiness.wait()
        except Refusal as refusal:
            return refusal
        finally:
            readiness_module.READY_WAIT_SECONDS = saved
        raise AssertionError("a request held through an unfinished replay was let through")

    return rendered(asyncio.run(hold()))


def start_up_failed(failure: str) -> tuple[int, dict]:
    """What every request gets once start-up could not restore an adapter."""

    async def refuse() -> Refusal:
        readiness = Readiness()
        readiness.open()
        readiness.failure = failure
        readiness.settle()
        try:
            await readiness.wait()
        except Refusal as refusal:
            return refusal
        raise AssertionError("a server whose start-up failed let a request through")

    return rendered(asyncio.run(refuse()))
