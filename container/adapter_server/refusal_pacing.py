"""Refusals answered at a bounded rate per tenant.

A refused request costs the server little, but a client that repeats it in a tight loop, or
keeps a few bodies it knows are refused in flight, gets its answers as fast as the event loop can
give them: every 400 or 413 is read, logged and sent at full speed, on the cores and the event loop
the other tenants' requests need. Each tenant (an adapter's metrics label; all unknown names share
one) may have `BURST` refusals (4xx but 429) at once; past that its refusals are held so that they go out at
`PER_SECOND`, a hold never longer than `MAX_HOLD_S`. Holding costs nothing (the event loop sleeps),
and a caller that sends a refused request now and then never waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

BURST = 10
"""Refusals a tenant gets at once without a hold."""
PER_SECOND = 5.0
"""The rate past the burst."""
MAX_HOLD_S = 5.0
"""The longest any refusal waits (far below SageMaker's 60 s invocation timeout)."""


class RefusalPacing:
    """A token bucket per key: holds past the burst, so refusals leave at the bucket's rate."""

    def __init__(
        self,
        *,
        burst: int = BURST,
        per_second: float = PER_SECOND,
        max_hold_s: float = MAX_HOLD_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._burst, self._rate, self._max_hold, self._clock = burst, per_second, max_hold_s, clock
        self._buckets: dict[str, tuple[float, float]] = {}
        """Key -> (tokens, when last counted); tokens below zero are refusals already held."""

    def hold_s(self, key: str) -> float:
        """How long this refusal waits: 0 within the burst, else its place in the key's queue."""
        now = self._clock()
        tokens, counted = self._buckets.get(key, (float(self._burst), now))
        tokens = min(float(self._burst), tokens + (now - counted) * self._rate) - 1
        # The queue never holds more than the longest hold: a refusal past it waits that long, no more.
        tokens = max(tokens, -self._max_hold * self._rate)
        self._buckets[key] = (tokens, now)
        return 0.0 if tokens >= 0 else -tokens / self._rate

    async def pace(self, key: str, status: int) -> float:
        """Wait out the hold of a refusal with `status`; the seconds held. Only client errors are
        paced: a 503 (starting, unhealthy) is the server's state, and ``/ping`` must answer it at
        once; a 429 already says when to come back (``Retry-After``) and may follow a wait in the
        queue of up to ``max_queue_wait_s``, which a hold would push toward SageMaker's timeout."""
        if not 400 <= status < 500 or status == 429:
            return 0.0
        hold = self.hold_s(key)
        if hold > 0:
            await asyncio.sleep(hold)
        return hold
