"""Refusal pacing: each tenant's refusals past a burst leave at a bounded rate, one tenant's pace
never holds another's, and nothing but a 4xx is ever held. A clock the test moves stands in for
time, so nothing here waits (about 0.1 s)."""

from __future__ import annotations

import asyncio

import pytest

from adapter_server import refusal_pacing
from adapter_server.refusal_pacing import RefusalPacing


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pacing(clock: Clock) -> RefusalPacing:
    return RefusalPacing(burst=10, per_second=5.0, max_hold_s=5.0, clock=clock)


def test_the_burst_is_free_and_each_refusal_past_it_waits_its_turn_at_the_rate():
    clock = Clock()
    pace = pacing(clock)
    holds = [pace.hold_s("loud-v1") for _ in range(14)]
    assert holds[:10] == [0.0] * 10
    assert holds[10:] == pytest.approx([0.2, 0.4, 0.6, 0.8]), "in line: the n-th past the burst waits n / rate"


def test_the_bucket_refills_at_the_rate_so_a_caller_that_slows_down_waits_no_more():
    clock = Clock()
    pace = pacing(clock)
    for _ in range(10):
        pace.hold_s("loud-v1")
    clock.now += 0.2  # one refusal's worth of refill
    assert pace.hold_s("loud-v1") == 0.0
    assert pace.hold_s("loud-v1") == pytest.approx(0.2)
    clock.now += 60
    assert [pace.hold_s("loud-v1") for _ in range(10)] == [0.0] * 10, "a quiet minute restores the whole burst"


def test_no_hold_is_longer_than_the_cap_however_many_wait():
    clock = Clock()
    pace = pacing(clock)
    holds = [pace.hold_s("loud-v1") for _ in range(200)]
    assert max(holds) == pytest.approx(5.0)
    assert holds[-1] == pytest.approx(5.0), "the queue is capped, not its members dropped"


def test_one_tenants_pace_never_holds_another():
    clock = Clock()
    pace = pacing(clock)
    for _ in range(50):
        pace.hold_s("loud-v1")
    assert pace.hold_s("quiet-v1") == 0.0


def test_only_client_errors_other_than_429_are_held(monkeypatch):
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(refusal_pacing.asyncio, "sleep", record)
    clock = Clock()
    pace = pacing(clock)

    async def refusals() -> list[float]:
        held = [await pace.pace("loud-v1", 400) for _ in range(12)]
        held.append(await pace.pace("loud-v1", 503))  # /ping while starting: never held
        held.append(await pace.pace("loud-v1", 500))
        held.append(await pace.pace("loud-v1", 429))
        return held

    held = asyncio.run(refusals())
    assert held[:10] == [0.0] * 10 and held[10:12] == pytest.approx([0.2, 0.4])
    assert held[12:] == [0.0, 0.0, 0.0], "503 and 500 are the server's state; a 429 may follow a wait in the queue"
    assert slept == pytest.approx([0.2, 0.4]), "each hold is slept, nothing else"


def test_a_held_refusal_keeps_nothing_of_the_request_alive():
    """Held with its traceback and chained exceptions, a refusal would keep the frames that hold a
    6 MB body it refused for as long as the hold lasts."""
    import gc
    import weakref

    from adapter_server.asgi_io import Refusal, detached

    class Body(bytearray):
        pass

    def refuse() -> None:
        body = Body(b"x" * 1024)
        kept.append(weakref.ref(body))
        try:
            raise ValueError("not JSON")
        except ValueError:
            raise Refusal(400, "invalid_json", "the request body is not JSON") from None

    kept: list[weakref.ref] = []
    try:
        refuse()
    except Refusal as refusal:
        held = detached(refusal)
    gc.collect()
    assert kept[0]() is None, "the body's frame was freed while the refusal is held"
    assert (held.status, held.__traceback__, held.__context__) == (400, None, None)
