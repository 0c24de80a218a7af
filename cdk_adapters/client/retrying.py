"""Waiting for a model that is not ready: bounded retries with backoff under one overall deadline.

botocore's own retry modes already retry throttling and transient 5xx answers (`botocore_config`).
What they do not retry is a component that has no capacity yet: scaled to zero and waking (SageMaker
answers a ValidationError for minutes:
https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html), a model still loading
(``ModelNotReadyException``), or a container replaying its adapters (503). Those are retried here,
with exponential backoff and jitter (many callers waking one component should not retry in step),
until the attempts or the deadline run out. Clock and sleep are injectable so tests never wait.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from botocore.config import Config
from botocore.exceptions import ClientError

from cdk_adapters.client.errors import (
    NO_CAPACITY_TEXT,
    DeadlineExceeded,
    EndpointWaking,
    error_message,
    is_throttled,
    is_waking,
    throttle_details,
)

T = TypeVar("T")


def botocore_config(*, max_attempts: int = 5, read_timeout_s: float = 70.0) -> Config:
    """botocore's ``standard`` retry mode (throttling, transient errors) and a read timeout above the
    60 s SageMaker gives a container to answer."""
    return Config(retries={"mode": "standard", "total_max_attempts": max_attempts}, read_timeout=read_timeout_s)


@dataclass(frozen=True)
class RetryPolicy:
    """How long to keep retrying a model that is not ready yet."""

    deadline_s: float = 600.0
    """Overall budget from the first attempt; waking a component from zero takes several minutes."""
    max_attempts: int = 60
    initial_backoff_s: float = 1.0
    max_backoff_s: float = 20.0
    jitter: bool = True
    """Sleep a random 50-100% of each backoff step."""

    def backoff(self, retry: int, rng: random.Random) -> float:
        """Seconds to sleep before retry number `retry` (1-based)."""
        step: float = min(self.max_backoff_s, self.initial_backoff_s * 2 ** (retry - 1))
        return step * rng.uniform(0.5, 1.0) if self.jitter else step


@dataclass
class Retrier:
    """Runs a call under a `RetryPolicy`; `clock` and `sleep` are `time`'s unless a test injects its own."""

    policy: RetryPolicy = field(default_factory=RetryPolicy)
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def call(self, attempt: Callable[[], T], *, subject: str) -> T:
        """`attempt()`'s result; waking errors are retried, every other error propagates at once."""
        started = self.clock()
        attempts = 0
        while True:
            attempts += 1
            try:
                return attempt()
            except ClientError as error:
                throttled = is_throttled(error)
                if not throttled and not is_waking(error):
                    raise
                last = error
            waited = self.clock() - started
            pause = self.policy.backoff(attempts, self.rng)
            if throttled:  # the container said when to come back: not sooner
                _, retry_after = throttle_details(str(last.response.get("OriginalMessage") or ""))
                pause = max(pause, retry_after or 0.0)
            if attempts >= self.policy.max_attempts or waited + pause > self.policy.deadline_s:
                if throttled:
                    raise last  # the caller maps it to AdapterThrottled: over its limit, not waking
                raise _gave_up(last, subject, attempts, waited, self.policy) from last
            self.sleep(pause)


def _gave_up(error: ClientError, subject: str, attempts: int, waited: float, policy: RetryPolicy) -> DeadlineExceeded:
    message = error_message(error)
    summary = (
        f"{subject} was not ready after {attempts} attempt(s) over {waited:.1f} s "
        f"(deadline {policy.deadline_s:g} s, at most {policy.max_attempts} attempts): {message}"
    )
    kind = EndpointWaking if NO_CAPACITY_TEXT in message else DeadlineExceeded
    return kind(summary, attempts=attempts, waited_s=waited)
