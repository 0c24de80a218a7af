"""Holding requests, and ``/ping``, until start-up is done.

SageMaker must never route to a server that silently lost adapters: until start-up has configured
the server and replayed every persisted registration, ``/ping`` answers 503 and other requests wait
(at most `READY_WAIT_SECONDS`); once start-up has failed, both answer 503 with the reason.
"""

from __future__ import annotations

import asyncio

from adapter_server.asgi_io import Refusal
from cdk_adapters.contract import error_kinds

READY_WAIT_SECONDS = 50.0
"""How long a request waits for start-up replay; SageMaker gives an invocation 60 s in all."""


class Readiness:
    """Whether start-up is done and succeeded; start-up writes `failure` and `pending_replay`."""

    def __init__(self) -> None:
        self._ready: asyncio.Event | None = None
        self.failure: str | None = None
        """Why the server cannot serve; set once, never cleared."""
        self.pending_replay: int | None = None
        """Persisted registrations not yet restored, for the 503 messages (None: not read yet)."""

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
                raise Refusal(503, error_kinds.UNHEALTHY, self.failure)
            return
        try:
            await asyncio.wait_for(self._ready.wait(), READY_WAIT_SECONDS)
        except TimeoutError:
            raise Refusal(503, error_kinds.STARTING, f"{self._progress()}; try again shortly") from None
        if self.failure:
            raise Refusal(503, error_kinds.UNHEALTHY, self.failure)

    def refuse_unless_healthy(self) -> None:
        """The health check's verdict, without waiting: a 503 while start-up runs or once it failed."""
        assert self._ready is not None
        if not self._ready.is_set():
            raise Refusal(503, error_kinds.STARTING, self._progress())
        if self.failure:
            raise Refusal(503, error_kinds.UNHEALTHY, self.failure)

    def _progress(self) -> str:
        if self.pending_replay is None:
            return "the server is reading its persisted adapter registrations"
        return f"the server is restoring {self.pending_replay} persisted adapter(s)"
