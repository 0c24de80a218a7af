"""Holding requests, and ``/ping``, until start-up is done.

SageMaker must never route to a server that silently lost adapters: until start-up has configured
the server and replayed every persisted registration, ``/ping`` answers 503 and other requests wait
(at most `READY_WAIT_SECONDS`); once start-up has failed, both answer 503 with the reason.
"""

from __future__ import annotations

import asyncio

from adapter_server.asgi_io import Refusal

READY_WAIT_SECONDS = 50.0
"""How long a request waits for start-up replay; SageMaker gives an invocation 60 s in all."""


class Readiness:
    """Whether start-up is done and succeeded; start-up writes `failure` and `pending_replay`."""

    def __init__(self) -> None:
        self._ready: asyncio.Event | None = None
        self.failure: str | None = None
        """Why the server cannot serve; set once, never cleared."""
        self.pending_replay = 0
        """Persisted registrations not yet restored, for the 503 messages."""

    def open(self) -> None:
        """Start-up has begun (inside the event loop): from now on, requests wait for `settle`."""
        self._ready = asyncio.Event()

    def settle(self) -> None:
        """Start-up is over, successful or not: release every waiting request."""
        assert self._ready is not None
        self._ready.set()

    async def wait(self) -> None:
        """Return once start-up succeeded; a 503 if it failed or is still replaying after the wait."""
        assert self._ready is not None
        if self._ready.is_set():  # the steady state: no timer task per request
            if self.failure:
                raise Refusal(503, "unhealthy", self.failure)
            return
        try:
            await asyncio.wait_for(self._ready.wait(), READY_WAIT_SECONDS)
        except asyncio.TimeoutError:
            raise Refusal(503, "starting", f"the server is still restoring {self.pending_replay} adapter(s)") from None
        if self.failure:
            raise Refusal(503, "unhealthy", self.failure)

    def refuse_unless_healthy(self) -> None:
        """The health check's verdict, without waiting: a 503 while start-up runs or once it failed."""
        assert self._ready is not None
        if not self._ready.is_set():
            raise Refusal(503, "starting", f"restoring persisted adapters ({self.pending_replay} left)")
        if self.failure:
            raise Refusal(503, "unhealthy", self.failure)
