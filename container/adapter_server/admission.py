"""Fair share of the engine across adapters: a burst from one tenant never queues ahead of another's.

vLLM schedules first come, first served: once its running batch is full (``--max-num-seqs``),
every new request waits behind all earlier ones, so one adapter's burst of sixteen makes a quiet
adapter's single request wait for all sixteen. Here the middleware lets at most the engine's own
concurrency into vLLM, so vLLM never has a queue of its own, and holds the rest in one queue per
adapter, released by weighted fair queueing (stride scheduling): each admission advances its
adapter's pass by ``1 / weight``, and a freed place goes to the waiting adapter with the lowest
pass. A quiet adapter therefore waits for at most the next place to free, whatever the backlog of
others, and a single busy adapter still fills the whole engine.

Headroom: waiting even for that next place costs a quiet adapter up to a whole request of another
adapter's, because vLLM batches continuously but only as wide as its batch. With ``headroom`` places
kept free for adapters that have nothing in the engine, a newly arriving request of such an adapter
joins the running batch at once. The places are kept only while such an adapter has been seen in the
last `RECENT_S` seconds: a single busy adapter on its own, or busy adapters that all hold places,
still fill the whole engine. A kept place stays empty only while a present adapter has none in the
engine and sends nothing: at most ``headroom`` of the batch, for at most `RECENT_S` after that
adapter's last request (`tenant_limits.default_headroom`: one place from a batch of 4 up; vLLM
0.31's default batch is 256 on GPUs under 70 GB, 128 on CPU).

A request costs one place per sequence it puts into the engine (``"n": 12`` is twelve: vLLM runs
twelve sequences in its batch), so fair share, `max_in_flight` and headroom count what a request
really takes; a request costing more than the whole engine is refused (`cost_refusal`).

Per-adapter limits (`contract.tenant_limits`) cap what one adapter may hold: places in the engine
(the rest of its requests wait), waiting requests and time spent waiting (over either: 429 with
``Retry-After``). A request whose caller disconnects while it waits leaves the queue and never
reaches the engine; a place is released when its request ends, however it ends.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

from adapter_server.asgi_io import Refusal
from cdk_adapters.contract import error_kinds
from cdk_adapters.contract.tenant_limits import DEFAULT_HEADROOM_PRESENCE_S, AdapterLimits

RECENT_S = float(DEFAULT_HEADROOM_PRESENCE_S)
"""How long after its last request an adapter still counts as present, so headroom is kept for it
(the contract's default; ``CDK_ADAPTERS_HEADROOM_PRESENCE_S`` changes it per server)."""


class CallerGone(Exception):
    """The caller disconnected while its request waited for a place."""


@dataclass
class _Lane:
    """One adapter's waiting requests and its share of the engine."""

    limits: AdapterLimits
    waiting: deque[tuple[asyncio.Future[None], int]] = field(default_factory=deque)
    """Each waiting request's ticket and cost (places), in arrival order."""
    in_engine: int = 0
    """Places this adapter holds (a request of cost 3 holds 3)."""
    pass_value: float = 0.0

    def can_enter(self, cost: int) -> bool:
        cap = self.limits.max_in_flight
        return cap is None or self.in_engine + cost <= cap or self.in_engine == 0


@dataclass(frozen=True)
class Admitted:
    """What the request log learns about one admission."""

    queue_ms: float
    """Time spent waiting for a place (0 when one was free)."""
    in_flight: int
    """The adapter's requests inside the engine once this one had its place, itself included."""


class FairAdmission:
    """At most `capacity` requests inside the engine; the rest wait per adapter, released fairly."""

    def __init__(
        self,
        capacity: int,
        limits: Callable[[str], AdapterLimits],
        *,
        headroom: int = 0,
        clock: Callable[[], float] = time.monotonic,
        presence_s: float | None = None,
    ) -> None:
        self.capacity = max(1, capacity)
        self._presence_s = RECENT_S if presence_s is None else presence_s
        """How long an adapter counts as present after its last request (default `RECENT_S`)."""
        self.headroom = min(max(0, headroom), self.capacity - 1)
        self._limits = limits
        self._clock = clock
        self._lanes: dict[str, _Lane] = {}
        self.in_engine = 0
        self._virtual_time = 0.0
        self._seen: dict[str, float] = {}
        """When each adapter last started or ended a request (only while headroom is kept)."""
        self._pruned_at = float("-inf")
        self._wake: asyncio.TimerHandle | None = None

    def waiting(self, adapter: str) -> int:
        lane = self._lanes.get(adapter)
        return len(lane.waiting) if lane else 0

    def cost_refusal(self, adapter: str, cost: int) -> Refusal | None:
        """`sequence_refusal` against this adapter's ``max_n`` and the engine's places."""
        return sequence_refusal(adapter, cost, self._limits(adapter), self.capacity)

    @asynccontextmanager
    async def place(self, adapter: str, caller_gone: Callable[[], Awaitable[object]], cost: int = 1) -> AsyncIterator[Admitted]:
        """Hold `cost` places in the engine for `adapter`'s request while the block runs.

        Raises `Refusal` (400 for a cost that can never fit: `cost_refusal`; 429 over the adapter's
        limits) and `CallerGone` when `caller_gone` (an awaitable that completes on disconnect)
        fires before its places are free.
        """
        refusal = self.cost_refusal(adapter, cost)
        if refusal is not None:
            raise refusal
        started = time.monotonic()
        lane = self._lane(adapter)
        self._saw(adapter)
        if not self._enter_now(adapter, lane, cost):
            await self._wait(adapter, lane, caller_gone, cost)
        try:
            yield Admitted(queue_ms=round((time.monotonic() - started) * 1000, 3), in_flight=lane.in_engine)
        finally:
            self._release(lane, cost)
            self._saw(adapter)
            self._dispatch()
            self._forget_if_idle(adapter, lane)

    def _lane(self, adapter: str) -> _Lane:
        lane = self._lanes.get(adapter)
        if lane is None:
            # A newly active adapter starts at the current virtual time: no credit saved while idle.
            lane = self._lanes[adapter] = _Lane(self._limits(adapter), pass_value=self._virtual_time)
        return lane

    def _enter_now(self, adapter: str, lane: _Lane, cost: int) -> bool:
        """Take free places at once, unless this lane's earlier requests wait or it may not enter.

        (Another lane that waits while places are free may not enter either: `_dispatch` leaves no
        enterable request waiting beside free places.)"""
        if not lane.waiting and self._may_enter(adapter, lane, cost):
            self._take(lane, cost)
            return True
        return False

    def _may_enter(self, adapter: str, lane: _Lane, cost: int) -> bool:
        """`cost` free places, within the lane's cap, and none of the headroom places if the lane
        already has a request in the engine while another adapter, present, has none there."""
        if self.in_engine + cost > self.capacity or not lane.can_enter(cost):
            return False
        if lane.in_engine == 0 or self.capacity - self.in_engine - cost >= self.headroom:
            return True
        return not self._other_outside(adapter)

    def _saw(self, adapter: str) -> None:
        if self.headroom:
            self._seen[adapter] = self._clock()

    def _other_outside(self, adapter: str) -> bool:
        """Whether another adapter that was seen within `RECENT_S` has nothing in the engine (the one
        the headroom is kept for; adapters that all hold places share the whole engine)."""
        self._forget_absent()
        return any(name != adapter and self._in_engine_of(name) == 0 for name in self._seen)

    def _in_engine_of(self, adapter: str) -> int:
        lane = self._lanes.get(adapter)
        return lane.in_engine if lane else 0

    def _forget_absent(self, *, force: bool = False) -> None:
        """Drop adapters not seen for `RECENT_S`: a pass over every adapter seen, so at most once a
        second (an adapter may count as present for up to a second longer) unless `force`d."""
        now = self._clock()
        if now - self._pruned_at < 1.0 and not force:
            return
        self._pruned_at = now
        for name, seen in list(self._seen.items()):
            if now - seen > self._presence_s and name not in self._lanes:
                del self._seen[name]

    async def _wait(self, adapter: str, lane: _Lane, caller_gone: Callable[[], Awaitable[object]], cost: int) -> None:
        limits = lane.limits
        if limits.max_queue is not None and len(lane.waiting) >= limits.max_queue:
            raise throttled(adapter, "max_queue", _queue_full(limits.max_queue), limits)
        ticket: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lane.waiting.append((ticket, cost))
        self._wake_when_headroom_lapses()  # a place may be free, kept back: free it when it lapses
        watcher = asyncio.ensure_future(caller_gone())
        try:
            waiters: set[asyncio.Future[None] | asyncio.Future[object]] = {ticket, watcher}
            done, _ = await asyncio.wait(waiters, timeout=limits.max_queue_wait_s, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            self._abandon(adapter, lane, ticket, cost)
            raise
        finally:
            watcher.cancel()
        if ticket in done:
            return  # `_dispatch` took the places on our behalf
        self._abandon(adapter, lane, ticket, cost)
        if watcher in done:
            raise CallerGone()
        raise throttled(adapter, "max_queue_wait_s", f"no place freed within {limits.max_queue_wait_s:g} s", limits)

    def _abandon(self, adapter: str, lane: _Lane, ticket: asyncio.Future[None], cost: int) -> None:
        """Leave the queue; if places were granted in the same instant, give them back."""
        if ticket.done() and not ticket.cancelled():
            self._release(lane, cost)
            self._dispatch()
        else:
            ticket.cancel()
            with suppress(ValueError):
                lane.waiting.remove((ticket, cost))
        self._forget_if_idle(adapter, lane)

    def _dispatch(self) -> None:
        """Give free places to waiting requests: the enterable lane with the lowest pass first."""
        while self.in_engine < self.capacity:
            ready = [
                (name, lane)
                for name, lane in self._lanes.items()
                if lane.waiting and self._may_enter(name, lane, lane.waiting[0][1])
            ]
            if not ready:
                self._wake_when_headroom_lapses()
                return
            _, lane = min(ready, key=lambda candidate: candidate[1].pass_value)
            ticket, cost = lane.waiting.popleft()
            if ticket.cancelled():
                continue
            self._take(lane, cost)
            ticket.set_result(None)

    def _wake_when_headroom_lapses(self) -> None:
        """Headroom kept for adapters that have since gone quiet is given back once they count as
        gone (`RECENT_S`), not only when the next request ends."""
        if self._wake is not None or self.in_engine >= self.capacity or not any(lane.waiting for lane in self._lanes.values()):
            return
        self._forget_absent(force=True)
        absent = [seen for name, seen in self._seen.items() if name not in self._lanes]
        if not absent:
            return  # what holds the places back is a request in the engine: its end dispatches again

        def wake() -> None:
            self._wake = None
            self._forget_absent(force=True)
            self._dispatch()

        self._wake = asyncio.get_running_loop().call_later(max(absent) + self._presence_s - self._clock() + 0.001, wake)

    def _take(self, lane: _Lane, cost: int) -> None:
        lane.in_engine += cost
        self.in_engine += cost
        self._virtual_time = max(self._virtual_time, lane.pass_value)
        lane.pass_value = max(lane.pass_value, self._virtual_time) + cost / lane.limits.weight

    def _release(self, lane: _Lane, cost: int) -> None:
        lane.in_engine -= cost
        self.in_engine -= cost

    def _forget_if_idle(self, adapter: str, lane: _Lane) -> None:
        if not lane.waiting and lane.in_engine == 0 and self._lanes.get(adapter) is lane:
            del self._lanes[adapter]


def sequence_refusal(adapter: str, cost: int, limits: AdapterLimits, capacity: int | None) -> Refusal | None:
    """400 for a request that asks for more sequences than its adapter's ``max_n``, or than the
    engine's `capacity` holds at once (it could never be let in); None when it fits."""
    if cost > limits.max_n:
        return Refusal(
            400,
            error_kinds.TOO_MANY_SEQUENCES,
            f"the request asks for {cost} sequences (n times its prompts); adapter {adapter!r} may ask for "
            f"at most {limits.max_n} per request (its max_n limit): send fewer, or several requests",
            adapter=adapter,
            limit="max_n",
        )
    if capacity is not None and cost > capacity:
        return Refusal(
            400,
            error_kinds.TOO_MANY_SEQUENCES,
            f"the request asks for {cost} sequences (n times its prompts); this engine runs at most "
            f"{capacity} at once: send fewer, or several requests",
            adapter=adapter,
            limit="engine",
        )
    return None


def throttled(adapter: str, limit: str, why: str, limits: AdapterLimits) -> Refusal:
    """The 429 an adapter over `limit` gets, with ``Retry-After`` (also in the body, for SageMaker
    passes only the container's status and body on to the caller)."""
    retry_after = limits.retry_after_s
    return Refusal(
        429,
        error_kinds.ADAPTER_THROTTLED,
        f"adapter {adapter!r} is over its {limit} limit ({why}); retry after {retry_after} s",
        headers={"Retry-After": str(retry_after)},
        adapter=adapter,
        limit=limit,
        retry_after=retry_after,
    )


def _queue_full(max_queue: int) -> str:
    if max_queue == 0:
        return "no request may wait"
    return "1 request already waits" if max_queue == 1 else f"{max_queue} requests already wait"
