"""What a deploy check sends and expects: the endpoint's `DeployCheck` (request, timeouts,
retries) and an adapter's own `AdapterCheck`, with their checks and the digest that says an
adapter changed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import Duration, Stack, Token

from cdk_adapters.deploy_check.request import DEFAULT_BODY, body_messages
from cdk_adapters.problems import Problem

WAIT_BUDGET_SECONDS = 14 * 60 - 60
"""The longest one adapter may be retried while its component wakes, plus its last call's timeout."""


@dataclass(frozen=True)
class AdapterCheck:
    """One adapter's own check request and what its answer must show (else the endpoint's default)."""

    body: Mapping[str, Any] | None = None
    """The request (a completions or chat body, without ``model``). Default: the endpoint's `DeployCheck.body`."""
    expect_text: str | None = None
    """Text the answer must contain. Default: any answer the adapter itself generated passes."""
    expect_json_keys: Sequence[str] | None = None
    """The answer must be a JSON object with these keys. Default: not checked."""

    def problems(self, subject: str, field_name: str) -> list[Problem]:
        found = body_problems(self.body, subject, f"{field_name}.body") if self.body is not None else []
        if self.expect_text is not None and (not isinstance(self.expect_text, str) or not self.expect_text):
            found.append(Problem(subject, f"{field_name}.expect_text", f"must be a non-empty string, got {self.expect_text!r}"))
        keys = self.expect_json_keys
        if keys is not None and (isinstance(keys, str) or not list(keys) or not all(isinstance(k, str) and k for k in keys)):
            found.append(
                Problem(subject, f"{field_name}.expect_json_keys", f"must be a non-empty list of key names, got {keys!r}")
            )
        return found

    def render(self) -> dict[str, Any]:
        """The handler's view of this check (only the fields given)."""
        rendered: dict[str, Any] = {}
        if self.body is not None:
            rendered["body"] = dict(self.body)
        if self.expect_text is not None:
            rendered["expect_text"] = self.expect_text
        if self.expect_json_keys is not None:
            rendered["expect_json_keys"] = list(self.expect_json_keys)
        return rendered


@dataclass(frozen=True)
class DeployCheck:
    """Prove after each deployment that every new or changed adapter answers as itself.

    Each deployment that creates or changes adapter components invokes each of them once
    (`body`, or the adapter's own `AdapterCheck`), costing one Lambda run and one short inference
    per changed adapter; docs/deploy-check.md says what it adds to deploy time.
    """

    body: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_BODY))
    """The default request. Default: a completions request for 8 greedy tokens of ``"Hello"``."""
    timeout: Duration = field(default_factory=lambda: Duration.seconds(60))
    """How long one invocation may take. Default 60 s (what SageMaker allows the container)."""
    wake_attempts: int = 20
    """Calls made while the component has no capacity yet (scaled to zero and waking, model not
    ready, container replaying its adapters) before the adapter fails. Default 20."""
    retry_interval: Duration = field(default_factory=lambda: Duration.seconds(30))
    """Wait between those calls. Default 30 s (so 20 attempts wait about 10 minutes)."""
    concurrency: int = 4
    """Adapters invoked at once. Default 4."""

    def problems(self, subject: str) -> list[Problem]:
        found = body_problems(self.body, subject, "deploy_check.body")
        timeout = _duration_seconds(self.timeout)
        interval = _duration_seconds(self.retry_interval)
        if timeout is None or not 1 <= timeout <= 600:
            found.append(
                Problem(subject, "deploy_check.timeout", f"must be a Duration from 1 second to 10 minutes, got {self.timeout!r}")
            )
        if interval is None or not 1 <= interval <= 300:
            found.append(
                Problem(
                    subject,
                    "deploy_check.retry_interval",
                    f"must be a Duration from 1 second to 5 minutes, got {self.retry_interval!r}",
                )
            )
        for name, value, high in (("wake_attempts", self.wake_attempts, 100), ("concurrency", self.concurrency, 16)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                found.append(Problem(subject, f"deploy_check.{name}", f"must be an integer from 1 to {high}, got {value!r}"))
        if not found and timeout is not None and interval is not None:
            budget = (self.wake_attempts - 1) * interval + timeout
            if budget > WAIT_BUDGET_SECONDS:
                found.append(
                    Problem(
                        subject,
                        "deploy_check.wake_attempts",
                        f"({self.wake_attempts}) x retry_interval ({interval:g} s) plus timeout ({timeout:g} s) is {budget:g} s; "
                        f"one adapter's wait must fit in {WAIT_BUDGET_SECONDS} s (the check runs in one Lambda "
                        "invocation of at most 14 minutes); lower wake_attempts or retry_interval",
                    )
                )
        return found

    def environment(self) -> dict[str, str]:
        return {
            "CHECK_TIMEOUT_SECONDS": f"{self.timeout.to_seconds():g}",
            "CHECK_WAKE_ATTEMPTS": str(self.wake_attempts),
            "CHECK_RETRY_INTERVAL_SECONDS": f"{self.retry_interval.to_seconds():g}",
            "CHECK_CONCURRENCY": str(self.concurrency),
        }


def _duration_seconds(value: object) -> float | None:
    if not isinstance(value, Duration) or Token.is_unresolved(value.to_seconds()):
        return None
    return value.to_seconds()


def body_problems(body: object, subject: str, field_name: str) -> list[Problem]:
    """A check request must be a small JSON object the container can route, asking for one answer."""
    return [Problem(subject, f"{field_name}.{sub}" if sub else field_name, message) for sub, message in body_messages(body)]


def adapter_digest(artifact_url: str, check: AdapterCheck | None, stack: Stack, tier_base: str | None = None) -> str:
    """What makes an adapter 'changed' for the check: its artifact URL (as CloudFormation will see
    it), its own check request, and the rank tier's base component it is on when that is not the
    first tier's (so a move between tiers is checked; one tier digests as it always did).
    Content-addressed URLs change with the bytes."""
    url = artifact_url
    if Token.is_unresolved(url):
        url = json.dumps(stack.resolve(url), sort_keys=True)
    request = json.dumps(check.render(), sort_keys=True) if check is not None else ""
    base = f"\0{tier_base}" if tier_base is not None else ""
    return hashlib.sha256(f"{url}\0{request}{base}".encode()).hexdigest()[:16]
