"""Run-time settings the middleware reads from the environment, parsed once and strictly.

The variable names and the policy codec are the shared contract in
`cdk_adapters.contract.serving_env` (the construct renders them); the two listen-address variables
exist only for local runs and tests, because SageMaker always talks to port 8080.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cdk_adapters.contract import adapter_identity, capture_record, request_metrics, serving_env
from cdk_adapters.contract import tenant_limits as limits_contract
from cdk_adapters.contract.env_values import parse_bool
from cdk_adapters.contract.runtime_api import is_loopback
from cdk_adapters.problems import Problem


@dataclass(frozen=True)
class ServingSettings:
    """What the middleware needs to know that vLLM's own arguments do not say."""

    allow_base_model: bool = False
    """Requests without an adapter reach the base model only when this is on."""
    base_model_id: str | None = None
    base_model_revision: str | None = None
    allow_vision_modules: bool = False
    body_names_adapter: bool = False
    """Local runs only (`serving_env.LOCAL_BODY_NAMES_ADAPTER`): with no adapter header, the body's
    ``model`` may name a registered adapter. Off, the header alone chooses the adapter."""
    state_dir: Path | None = None
    """Where registrations are persisted; ``None`` keeps them in memory only (logged as a warning)."""
    metrics: request_metrics.RequestMetricsSettings = request_metrics.RequestMetricsSettings()
    """What the request log embeds (EMF on/off, namespace, metrics, endpoint); decoded by the contract."""
    tenant_limits: limits_contract.TenantLimits = limits_contract.TenantLimits()
    """Fair share across adapters and each adapter's limits; decoded by the contract."""
    capture: capture_record.CapturePolicy = capture_record.CapturePolicy()
    """Which adapters' requests are captured to the log (none by default); decoded by the contract."""
    capture_log_group_arn: str | None = None
    """Where captured records go, one stream per adapter (`capture_record.CAPTURE_LOG_GROUP_ENV`);
    None: standard output (local mode)."""
    component_prefix: str | None = None
    """The endpoint's component prefix (`adapter_identity`): a component name SageMaker sends is
    reduced to the adapter it serves, so every per-adapter feature keys by one identity."""

    def adapter_key(self, name: str) -> str:
        """The identity every per-adapter feature keys by (`adapter_identity.adapter_key`)."""
        return adapter_identity.adapter_key(name, self.component_prefix)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> tuple[ServingSettings, list[Problem]]:
        environ = os.environ if environ is None else environ
        problems: list[Problem] = []
        state_dir = environ.get(serving_env.STATE_DIR, "").strip()
        policy, policy_problems = serving_env.decode_policy(environ)
        problems.extend(policy_problems)
        metrics, metrics_problems = request_metrics.decode(environ)
        problems.extend(metrics_problems)
        limits, limits_problems = limits_contract.decode(environ)
        problems.extend(limits_problems)
        capture, capture_problems = capture_record.decode(environ)
        problems.extend(capture_problems)
        capture_log_group_arn = environ.get(capture_record.CAPTURE_LOG_GROUP_ENV, "").strip() or None
        if capture_log_group_arn is not None:
            try:
                capture_record.log_group_from_arn(capture_log_group_arn)
            except ValueError as error:
                problems.append(Problem(capture_record.CAPTURE_LOG_GROUP_ENV, "value", str(error)))
        settings = cls(
            allow_base_model=policy.allow_base_model,
            base_model_id=policy.base_model_id,
            base_model_revision=policy.base_model_revision,
            allow_vision_modules=policy.allow_vision_modules,
            body_names_adapter=parse_bool(environ, serving_env.LOCAL_BODY_NAMES_ADAPTER, False, problems),
            state_dir=Path(state_dir) if state_dir else None,
            metrics=metrics,
            tenant_limits=limits,
            capture=capture,
            capture_log_group_arn=capture_log_group_arn,
            component_prefix=adapter_identity.component_prefix_from(environ),
        )
        if settings.body_names_adapter and not is_loopback(environ.get(serving_env.LISTEN_HOST, "")):
            problems.append(
                Problem(
                    serving_env.LOCAL_BODY_NAMES_ADAPTER,
                    "value",
                    f"is for local runs only and needs {serving_env.LISTEN_HOST} set to a loopback address (127.0.0.1): "
                    "on an endpoint the adapter is the inference component SageMaker names, never the body's model",
                )
            )
        return settings, problems
