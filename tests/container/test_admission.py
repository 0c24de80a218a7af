"""Fair share across adapters, as a queue discipline: order, weights, limits, cancellation, no leaks.

These drive `FairAdmission` itself on an event loop (it is the thing under test); the behaviour on
a real vLLM server under saturation is in `test_serving_fair_share.py`.
"""

from __future__ import annotations

import asyncio

import pytest

from adapter_server.admission import RECENT_S, CallerGone, FairAdmission
from adapter_server.asgi_io import Refusal
from cdk_adapters.contract import tenant_limits
from cdk_adapters.contract.tenant_limits import AdapterLimits
from tests.support.fake_clock import FakeClock


def limits_of(table: dict[str, AdapterLimits]):
    return lambda adapter: table.get(adapter, AdapterLimits())


async def never_gone() -> None:
    await asyncio.Event().wait()


class Engine:
    """Requests that hold their place until released, recording the order they entered."""

    def __init__(self, admission: FairAdmission) -> None:
        self.admission = admission
        self.entered: list[str] = []
        self.in_flight: dict[str, int] = {}
        """What each request's admission said its adapter had in the engine (the log's ``in_flight``)."""
        self.release: dict[str, asyncio.Event] = {}

    async def request(self, adapter: str, tag: str, gone=never_gone) -> str:
        event = self.release.setdefault(tag, asyncio.Event())
        async with self.admission.place(adapter, gone) as admitted:
            self.entered.append(tag)
            self.in_flight[tag] = admitted.in_flight
            await event.wait()
        return tag

    async def served_once(self, adapter: str, tag: str) -> None:
        """One request of `adapter` enters and ends: the adapter was here and has nothing in the engine now."""
        request = asyncio.ensure_future(self.request(adapter, tag))
        await self.settle()
        self.release[tag].set()
        await request

    async def settle(self) -> None:
        for _ in range(5):
            await asyncio.sleep(0)


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_burst_does_not_queue_ahead_of_another_adapter():
    async def scenario():
        engine = Engine(FairAdmission(2, limits_of({})))
        tasks = [asyncio.ensure_future(engine.request("noisy", f"n{i}")) for i in range(6)]
        await engine.settle()
        tasks.append(asyncio.ensure_future(engine.request("quiet", "q0")))
        await engine.settle()
        assert engine.entered == ["n0", "n1"]  # the engine is full
        engine.release["n0"].set()
        await engine.settle()
        # The freed place goes to the quiet adapter, ahead of the four noisy requests that waited longer.
        assert engine.entered == ["n0", "n1", "q0"]
        for tag in ["n1", "q0", "n2", "n3", "n4", "n5"]:
            engine.release[tag].set()
            await engine.settle()
        await asyncio.gather(*tasks)
        assert engine.entered == ["n0", "n1", "q0", "n2", "n3", "n4", "n5"]
        assert engine.admission.in_engine == 0 and engine.admission._lanes == {}
        # In-flight counts the adapter's own requests in the engine, itself included.
        assert [engine.in_flight[tag] for tag in ("n0", "n1", "q0")] == [1, 2, 1]

    run(scenario())


def test_one_busy_adapter_alone_fills_the_whole_engine():
    async def scenario():
        engine = Engine(FairAdmission(3, limits_of({})))
        tasks = [asyncio.ensure_future(engine.request("only", f"o{i}")) for i in range(5)]
        await engine.settle()
        assert engine.entered == ["o0", "o1", "o2"]  # nothing is held back for tenants that are not there
        for event in engine.release.values():
            event.set()
        await asyncio.gather(*tasks)

    run(scenario())


def test_weights_share_freed_places_in_proportion():
    async def scenario():
        engine = Engine(FairAdmission(1, limits_of({"heavy": AdapterLimits(weight=3)})))
        first = asyncio.ensure_future(engine.request("other", "hold"))
        await engine.settle()
        tasks = [asyncio.ensure_future(engine.request("heavy", f"h{i}")) for i in range(6)]
        tasks += [asyncio.ensure_future(engine.request("light", f"l{i}")) for i in range(2)]
        await engine.settle()
        engine.release["hold"].set()
        for _ in range(8):
            await engine.settle()
            engine.release[engine.entered[-1]].set()
        await asyncio.gather(first, *tasks)
        order = [tag[0] for tag in engine.entered[1:]]
        assert order == ["h", "l", "h", "h", "h", "l", "h", "h"]  # three heavy for each light

    run(scenario())


def test_max_in_flight_keeps_an_adapter_to_its_places_and_lets_others_use_the_rest():
    async def scenario():
        engine = Engine(FairAdmission(4, limits_of({"capped": AdapterLimits(max_in_flight=1)})))
        tasks = [asyncio.ensure_future(engine.request("capped", f"c{i}")) for i in range(3)]
        tasks.append(asyncio.ensure_future(engine.request("free", "f0")))
        await engine.settle()
        assert engine.entered == ["c0", "f0"]
        engine.release["c0"].set()
        await engine.settle()
        assert engine.entered == ["c0", "f0", "c1"]
        for event in engine.release.values():
            event.set()
        for tag in ("c2",):
            await engine.settle()
            engine.release.setdefault(tag, asyncio.Event()).set()
        await asyncio.gather(*tasks)
        assert engine.admission.in_engine == 0

    run(scenario())


def test_over_max_queue_is_429_with_retry_after_and_takes_no_place():
    async def scenario():
        engine = Engine(FairAdmission(1, limits_of({"t": AdapterLimits(max_queue=1, max_queue_wait_s=2.5)})))
        holder = asyncio.ensure_future(engine.request("t", "t0"))
        waiter = asyncio.ensure_future(engine.request("t", "t1"))
        await engine.settle()
        with pytest.raises(Refusal) as refused:
            await engine.request("t", "t2")
        error = refused.value
        assert (error.status, error.kind, error.extra["limit"], error.headers) == (
            429,
            "adapter_throttled",
            "max_queue",
            {"Retry-After": "3"},
        )
        assert error.message == "adapter 't' is over its max_queue limit (1 request already waits); retry after 3 s"
        engine.release["t0"].set()
        engine.release["t1"].set()
        await asyncio.gather(holder, waiter)
        assert engine.admission.in_engine == 0 and engine.admission._lanes == {}

    run(scenario())


def test_a_request_that_waits_too_long_is_429_and_leaves_the_queue():
    async def scenario():
        engine = Engine(FairAdmission(1, limits_of({"t": AdapterLimits(max_queue_wait_s=0.05)})))
        holder = asyncio.ensure_future(engine.request("other", "hold"))
        await engine.settle()
        with pytest.raises(Refusal) as refused:
            await engine.request("t", "late")
        assert refused.value.extra["limit"] == "max_queue_wait_s"
        assert engine.admission.waiting("t") == 0
        engine.release["hold"].set()
        await holder
        assert "late" not in engine.entered and engine.admission._lanes == {}

    run(scenario())


def test_a_caller_that_leaves_while_waiting_never_enters():
    async def scenario():
        engine = Engine(FairAdmission(1, limits_of({})))
        holder = asyncio.ensure_future(engine.request("a", "hold"))
        gone = asyncio.Event()
        leaving = asyncio.ensure_future(engine.request("b", "leaves", gone=gone.wait))
        after = asyncio.ensure_future(engine.request("c", "after"))
        await engine.settle()
        gone.set()
        with pytest.raises(CallerGone):
            await leaving
        engine.release["hold"].set()
        await engine.settle()
        engine.release["after"].set()
        await asyncio.gather(holder, after)
        assert engine.entered == ["hold", "after"]
        assert engine.admission.in_engine == 0 and engine.admission._lanes == {}

    run(scenario())


def test_a_request_that_fails_or_is_cancelled_releases_its_place():
    async def scenario():
        admission = FairAdmission(1, limits_of({}))

        async def failing():
            async with admission.place("a", never_gone):
                raise RuntimeError("engine error")

        with pytest.raises(RuntimeError):
            await failing()
        engine = Engine(admission)
        running = asyncio.ensure_future(engine.request("a", "running"))
        waiting = asyncio.ensure_future(engine.request("b", "waiting"))
        await engine.settle()
        running.cancel()  # e.g. the server cancelled the task
        waiting_after = asyncio.ensure_future(engine.request("c", "next"))
        await engine.settle()
        assert engine.entered == ["running", "waiting"]
        waiting.cancel()
        await engine.settle()
        assert engine.entered == ["running", "waiting", "next"]
        engine.release["next"].set()
        await waiting_after
        assert admission.in_engine == 0 and admission._lanes == {}

    run(scenario())


def test_churn_leaks_nothing():
    async def scenario():
        admission = FairAdmission(3, limits_of({"t": AdapterLimits(max_queue=4, max_queue_wait_s=0.02)}))

        async def one(index: int):
            async with admission.place(("t", "u", "v")[index % 3], never_gone):
                await asyncio.sleep(0.001 * (index % 4))
                if index % 7 == 0:
                    raise ValueError(index)

        tasks = [asyncio.ensure_future(one(i)) for i in range(300)]
        for index, task in enumerate(tasks):
            if index % 11 == 0:
                task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        kinds = {type(result).__name__ for result in results}
        assert kinds <= {"NoneType", "ValueError", "CancelledError", "Refusal"}
        assert admission.in_engine == 0 and admission._lanes == {}

    run(scenario())


async def _six_noisy_after_one_quiet(clock: FakeClock) -> tuple[Engine, list[asyncio.Future]]:
    """An engine of 4 places with headroom 1: the quiet adapter served once (q0), then six noisy
    requests (n0..n5) sent and settled."""
    engine = Engine(FairAdmission(4, limits_of({}), headroom=1, clock=clock))
    await engine.served_once("quiet", "q0")
    tasks = [asyncio.ensure_future(engine.request("noisy", f"n{i}")) for i in range(6)]
    await engine.settle()
    return engine, tasks


def test_headroom_lets_a_returning_quiet_adapter_join_the_batch_at_once():
    async def scenario():
        clock = FakeClock(1000.0)
        engine, tasks = await _six_noisy_after_one_quiet(clock)
        assert engine.entered == ["q0", "n0", "n1", "n2"]  # one place stays free for the quiet adapter
        engine.release["n0"].set()
        await engine.settle()
        assert engine.entered == ["q0", "n0", "n1", "n2", "n3"]  # a freed place still goes to the noisy backlog
        clock.now += 1
        tasks.append(asyncio.ensure_future(engine.request("quiet", "q1")))
        await engine.settle()
        assert engine.entered[-1] == "q1"  # no wait for a noisy request to end
        assert engine.admission.in_engine == 4
        for tag in ["q1", "n1", "n2", "n3", "n4", "n5"]:
            engine.release[tag].set()
            await engine.settle()
        await asyncio.gather(*tasks)
        assert engine.entered[6:] == ["n4", "n5"]
        assert engine.admission.in_engine == 0 and engine.admission._lanes == {}

    run(scenario())


def test_headroom_is_given_back_once_the_quiet_adapter_counts_as_gone():
    async def scenario():
        clock = FakeClock(1000.0)
        engine, tasks = await _six_noisy_after_one_quiet(clock)
        assert engine.entered == ["q0", "n0", "n1", "n2"]
        clock.now += RECENT_S + 1
        engine.release["n0"].set()
        await engine.settle()
        # The quiet adapter is gone: the noisy one fills the whole engine again.
        assert engine.entered == ["q0", "n0", "n1", "n2", "n3", "n4"]
        assert engine.admission.in_engine == 4
        for event in engine.release.values():
            event.set()
        for tag in ("n5",):
            await engine.settle()
            engine.release.setdefault(tag, asyncio.Event()).set()
        await asyncio.gather(*tasks)
        assert engine.admission.in_engine == 0 and engine.admission._seen == {"noisy": clock.now}

    run(scenario())


def test_a_longer_presence_keeps_the_headroom_past_the_default_window():
    """``CDK_ADAPTERS_HEADROOM_PRESENCE_S``: decoded by the contract, honoured by admission."""
    limits, problems = tenant_limits.decode({tenant_limits.HEADROOM_PRESENCE_ENV: "600"})
    assert problems == [] and limits.headroom_presence_s == 600
    _, problems = tenant_limits.decode({tenant_limits.HEADROOM_PRESENCE_ENV: "0"})
    assert [p.subject for p in problems] == [tenant_limits.HEADROOM_PRESENCE_ENV]
    assert tenant_limits.decode({})[0].headroom_presence_s == RECENT_S

    async def scenario():
        clock = FakeClock(1000.0)
        engine = Engine(FairAdmission(4, limits_of({}), headroom=1, clock=clock, presence_s=limits.headroom_presence_s))
        await engine.served_once("quiet", "q0")
        tasks = [asyncio.ensure_future(engine.request("noisy", f"n{i}")) for i in range(6)]
        await engine.settle()
        clock.now += RECENT_S * 10  # long past the default window, within 600 s
        engine.release["n0"].set()
        await engine.settle()
        assert engine.entered == ["q0", "n0", "n1", "n2", "n3"]  # the kept place is still kept
        for event in list(engine.release.values()):
            event.set()
        for tag in ("n4", "n5"):
            await engine.settle()
            engine.release.setdefault(tag, asyncio.Event()).set()
        await asyncio.gather(*tasks)

    run(scenario())


def test_with_headroom_one_busy_adapter_alone_and_busy_adapters_together_fill_the_engine():
    async def scenario():
        engine = Engine(FairAdmission(4, limits_of({}), headroom=1, clock=FakeClock(1000.0)))
        tasks = [asyncio.ensure_future(engine.request("only", f"o{i}")) for i in range(5)]
        await engine.settle()
        assert engine.entered == ["o0", "o1", "o2", "o3"]  # nobody to keep a place for
        tasks += [asyncio.ensure_future(engine.request("other", f"t{i}")) for i in range(3)]
        engine.release["o0"].set()
        await engine.settle()
        engine.release["o1"].set()
        await engine.settle()
        # Both adapters hold places: the whole engine is used, nothing is kept back between them.
        assert engine.entered == ["o0", "o1", "o2", "o3", "t0", "o4"]
        assert engine.admission.in_engine == 4
        for event in engine.release.values():
            event.set()
        for tag in ("t1", "t2"):
            await engine.settle()
            engine.release.setdefault(tag, asyncio.Event()).set()
        await asyncio.gather(*tasks)
        assert engine.admission.in_engine == 0 and engine.admission._lanes == {}

    run(scenario())


def test_headroom_is_never_the_whole_engine():
    assert FairAdmission(1, limits_of({}), headroom=1).headroom == 0
    assert FairAdmission(4, limits_of({}), headroom=9).headroom == 3


def test_headroom_kept_for_an_adapter_that_left_is_given_back_by_the_timer_without_spinning(monkeypatch):
    """No request ends to dispatch again: the timer must, once, when the quiet adapter counts as gone."""
    from adapter_server import admission as admission_module

    monkeypatch.setattr(admission_module, "RECENT_S", 0.2)

    async def scenario():
        admission = FairAdmission(4, limits_of({}), headroom=1)
        dispatches = 0
        dispatch = admission._dispatch

        def counted() -> None:
            nonlocal dispatches
            dispatches += 1
            dispatch()

        admission._dispatch = counted
        engine = Engine(admission)
        await engine.served_once("quiet", "q0")
        tasks = [asyncio.ensure_future(engine.request("noisy", f"n{i}")) for i in range(4)]
        await engine.settle()
        assert engine.entered == ["q0", "n0", "n1", "n2"]  # the fourth waits: a place is kept for "quiet"
        before = dispatches
        for _ in range(500):  # a deadline for a hung test only; the state decides
            if "n3" in engine.entered:
                break
            await asyncio.sleep(0.01)
        assert engine.entered == ["q0", "n0", "n1", "n2", "n3"]
        assert dispatches - before <= 3  # woken once (a busy loop would dispatch hundreds of times)
        for event in engine.release.values():
            event.set()
        await asyncio.gather(*tasks)
        assert admission.in_engine == 0 and admission._lanes == {}

    run(scenario())


# --- A request costs one place per sequence it asks for (``n``). ---


async def _enter(admission: FairAdmission, adapter: str, cost: int, release: asyncio.Event, entered: list[str]) -> None:
    async with admission.place(adapter, never_gone, cost):
        entered.append(adapter)
        await release.wait()


def test_a_request_with_n_takes_n_places_and_the_rest_stay_for_others():
    async def scenario():
        admission = FairAdmission(4, limits_of({}))
        release, entered = asyncio.Event(), []
        fan = asyncio.ensure_future(_enter(admission, "fan", 3, release, entered))
        await asyncio.sleep(0)
        wide = asyncio.ensure_future(_enter(admission, "wide", 2, release, entered))
        quiet = asyncio.ensure_future(_enter(admission, "quiet", 1, release, entered))
        for _ in range(5):
            await asyncio.sleep(0)
        held = (admission.in_engine, list(entered), admission.waiting("wide"))
        release.set()
        await asyncio.gather(fan, wide, quiet)
        return held, admission.in_engine

    (in_engine, entered, waiting), after = run(scenario())
    assert (in_engine, entered, waiting) == (4, ["fan", "quiet"], 1)
    assert after == 0


def test_a_costly_request_advances_its_adapter_by_its_cost():
    """Stride: a request of cost 3 counts as three turns, so its adapter's next request waits behind
    three single requests of another adapter (counted as one turn, it would go second)."""

    async def scenario():
        admission = FairAdmission(3, limits_of({}))
        order: list[str] = []
        release = {tag: asyncio.Event() for tag in ("h", "a1")}

        async def one(adapter: str, cost: int, tag: str) -> None:
            async with admission.place(adapter, never_gone, cost):
                order.append(tag)
                if tag in release:
                    await release[tag].wait()

        tasks = [asyncio.ensure_future(one("h", 3, "h"))]
        await asyncio.sleep(0)
        tasks += [asyncio.ensure_future(one("a", 3, "a1"))]
        await asyncio.sleep(0)
        tasks += [asyncio.ensure_future(one("b", 1, f"b{i}")) for i in (1, 2, 3)]
        tasks += [asyncio.ensure_future(one("a", 1, "a2"))]
        for _ in range(5):
            await asyncio.sleep(0)
        release["h"].set()
        for _ in range(5):
            await asyncio.sleep(0)
        release["a1"].set()
        await asyncio.gather(*tasks)
        return order

    assert run(scenario()) == ["h", "a1", "b1", "b2", "b3", "a2"]


def test_more_sequences_than_max_n_or_the_engine_is_400_and_takes_no_place():
    async def scenario():
        admission = FairAdmission(4, limits_of({"small": AdapterLimits(max_n=2)}))
        refusals = []
        for adapter, cost in (("small", 3), ("other", 5), ("big", 8)):
            try:
                async with admission.place(adapter, never_gone, cost):
                    pass
            except Refusal as refusal:
                refusals.append((refusal.status, refusal.kind, refusal.extra["limit"]))
        return refusals, admission.in_engine

    refusals, in_engine = run(scenario())
    assert refusals == [
        (400, "too_many_sequences", "max_n"),
        (400, "too_many_sequences", "max_n"),
        (400, "too_many_sequences", "max_n"),
    ]
    assert in_engine == 0
    engine_bound = FairAdmission(2, limits_of({"wide": AdapterLimits(max_n=8)})).cost_refusal("wide", 3)
    assert engine_bound is not None and engine_bound.extra["limit"] == "engine"
    assert "runs at most 2 at once" in engine_bound.message


def test_max_in_flight_counts_sequences_but_one_request_always_fits_an_empty_lane():
    async def scenario():
        admission = FairAdmission(8, limits_of({"capped": AdapterLimits(max_in_flight=2, max_n=4)}))
        release, entered = asyncio.Event(), []
        first = asyncio.ensure_future(_enter(admission, "capped", 3, release, entered))
        await asyncio.sleep(0)
        second = asyncio.ensure_future(_enter(admission, "capped", 1, release, entered))
        for _ in range(5):
            await asyncio.sleep(0)
        held = (admission.in_engine, admission.waiting("capped"))
        release.set()
        await asyncio.gather(first, second)
        return held

    assert run(scenario()) == (3, 1)


def test_a_cancelled_costly_waiter_granted_in_the_same_tick_gives_every_place_back():
    async def scenario():
        admission = FairAdmission(3, limits_of({}))
        release, entered = asyncio.Event(), []
        holder = asyncio.ensure_future(_enter(admission, "a", 3, release, entered))
        await asyncio.sleep(0)
        waiter = asyncio.ensure_future(_enter(admission, "b", 2, asyncio.Event(), entered))
        await asyncio.sleep(0)
        release.set()
        await holder  # its exit grants b's places: b's ticket is done, b has not run yet
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        return admission.in_engine

    assert run(scenario()) == 0
