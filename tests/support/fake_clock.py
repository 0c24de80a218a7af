"""A clock that moves only when the code under test sleeps, so retries and back-off run at once
and their waits are counted (the client's `Retrier` and the deploy check take ``clock``/``sleep``)."""

from __future__ import annotations


class FakeClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
