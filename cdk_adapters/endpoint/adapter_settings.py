"""What each adapter may take from the shared engine (fair share and limits) and whether its
requests are captured: the endpoint's defaults, each adapter's own, and the container variables
they render to at synth (after every `add_adapter`).
"""

from __future__ import annotations

from collections.abc import Callable

import jsii
from aws_cdk import IStableAnyProducer
from constructs import IValidation

from cdk_adapters.contract import capture_record, tenant_limits
from cdk_adapters.contract.tenant_limits import AdapterLimits
from cdk_adapters.endpoint.serving_policy import ENVIRONMENT_VALUE_MAX_LENGTH
from cdk_adapters.problems import Problem


class AdapterSettings:
    """Fair share, the default and per-adapter limits and capture settings of one endpoint."""

    def __init__(
        self,
        *,
        fair_share: bool,
        default_limits: AdapterLimits | None,
        default_capture: capture_record.CaptureSettings | None,
        engine_batch: int | None,
        capture_log_group_arn: Callable[[], str],
    ) -> None:
        self.fair_share = fair_share
        self.default_limits = default_limits
        self.default_capture = default_capture
        self._engine_batch = engine_batch
        self._capture_log_group_arn = capture_log_group_arn
        self._limits: dict[str, AdapterLimits] = {}
        self._capture: dict[str, capture_record.CaptureSettings] = {}

    def default_problems(self, subject: str) -> list[Problem]:
        """The endpoint's `adapter_limits` and `adapter_capture`."""
        problems: list[Problem] = []
        if self.default_limits is not None:
            problems += self.limits_problems(self.default_limits, subject, "adapter_limits")
        if self.default_capture is not None:
            problems += self.default_capture.problems(subject, "adapter_capture")
        return problems

    def adapter_problems(
        self, limits: AdapterLimits | None, capture: capture_record.CaptureSettings | None, subject: str
    ) -> list[Problem]:
        """One adapter's own `limits` and `capture`."""
        problems: list[Problem] = []
        if limits is not None:
            problems += self.limits_problems(limits, subject, "limits")
        if capture is not None:
            problems += capture.problems(subject, "capture")
        return problems

    def limits_problems(self, limits: AdapterLimits, subject: str, field: str) -> list[Problem]:
        """A limit's own rules, and a `max_in_flight` the engine's batch can hold."""
        problems = limits.problems(subject, field)
        engine = self._engine_batch
        if isinstance(limits.max_in_flight, int) and isinstance(engine, int) and limits.max_in_flight > engine:
            problems.append(
                Problem(
                    subject,
                    f"{field}.max_in_flight",
                    f"({limits.max_in_flight}) cannot hold: the engine runs at most vllm.max_num_seqs={engine} requests at once",
                )
            )
        return problems

    def add(self, adapter: str, limits: AdapterLimits | None, capture: capture_record.CaptureSettings | None) -> None:
        """Record an added adapter's own settings (checked already)."""
        if limits is not None:
            self._limits[adapter] = limits
        if capture is not None:
            self._capture[adapter] = capture

    def limits_environment(self) -> dict[str, str]:
        """The container variables for fair share and adapter limits."""
        return tenant_limits.environment(fair_share=self.fair_share, default=self.default_limits, adapters=self._limits)

    def capture_environment(self) -> dict[str, str]:
        """The container variables for per-adapter capture (empty when off)."""
        found = capture_record.environment(
            capture_record.CapturePolicy(default=self.default_capture, adapters=dict(self._capture))
        )
        if found:
            found[capture_record.CAPTURE_LOG_GROUP_ENV] = self._capture_log_group_arn()
        return found


@jsii.implements(IStableAnyProducer)
class ServingEnvironment:
    """The model's container environment with the settings of every adapter added so far."""

    def __init__(self, settings: AdapterSettings, base: dict[str, str]) -> None:
        self._settings = settings
        self._base = base

    def produce(self) -> dict[str, str]:
        return {**self._base, **self._settings.limits_environment(), **self._settings.capture_environment()}


@jsii.implements(IValidation)
class SettingsSizeValidation:
    """At synth: the adapters' limits and capture settings each fit in one SageMaker environment value."""

    def __init__(self, settings: AdapterSettings, subject: str) -> None:
        self._settings = settings
        self._subject = subject

    def validate(self) -> list[str]:
        value = self._settings.limits_environment().get(tenant_limits.LIMITS_ENV, "")
        captured = self._settings.capture_environment().get(capture_record.CAPTURE_ENV, "")
        problems = []
        if len(value) > ENVIRONMENT_VALUE_MAX_LENGTH:
            problems.append(
                f"{self._subject}: limits: the adapters' own limits take {len(value)} "
                f"characters in {tenant_limits.LIMITS_ENV}; SageMaker allows {ENVIRONMENT_VALUE_MAX_LENGTH} per variable. "
                "Set common limits once with adapter_limits= and give only the exceptions their own"
            )
        if len(captured) > ENVIRONMENT_VALUE_MAX_LENGTH:
            problems.append(
                f"{self._subject}: capture: the adapters' own capture settings take "
                f"{len(captured)} characters in {capture_record.CAPTURE_ENV}; SageMaker allows {ENVIRONMENT_VALUE_MAX_LENGTH} "
                "per variable. Set common settings once with adapter_capture= and give only the exceptions their own"
            )
        return problems
