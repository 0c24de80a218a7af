"""What the serving container admits and how it identifies the base model: one group of props.

Rendered into the model's container environment beside the vLLM options by the codec in
`cdk_adapters.contract.serving_env`, which the container decodes it with. Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cdk_adapters.contract import reserved_config, serving_env
from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.problems import Problem

ENVIRONMENT_VALUE_MAX_LENGTH = 1024
"""SageMaker's limit on one container environment value."""


@dataclass(frozen=True)
class ServingPolicy:
    """Requests and adapters the container accepts, and the base identity adapters must name."""

    allow_base_model: bool = False
    """Let requests without an adapter reach the base model. Default False: they get 400, so a
    dropped adapter header never silently returns un-fine-tuned output."""
    allow_vision_modules: bool = False
    """Admit adapters that target a vision tower or connector. Default False."""
    base_model_id: str | None = None
    """The identity adapters must name in ``base_model_name_or_path``. Default: not checked."""
    base_model_revision: str | None = None
    """The base model's pinned revision (needs `base_model_id`). Default: not checked."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """Further container variables; may not override the construct's own."""

    def render(self, vllm: VllmOptions, subject: str) -> tuple[dict[str, str], list[Problem]]:
        """The container environment, and every problem with it."""
        policy = serving_env.PolicySettings(
            allow_base_model=self.allow_base_model,
            allow_vision_modules=self.allow_vision_modules,
            base_model_id=self.base_model_id,
            base_model_revision=self.base_model_revision,
        )
        revision = serving_env.revision_problem(self.base_model_id, self.base_model_revision, "base_model.model_id")
        problems = [Problem(subject, "base_model.revision", revision)] if revision else []
        env = vllm.environment()
        env.update(policy.environment())
        if self.allow_vision_modules and vllm.enable_tower_connector_lora is None:
            # Admitting tower/connector adapters means serving them: vLLM ignores those weights without the flag.
            env[serving_env.flag_variable("--enable-tower-connector-lora")] = "true"
        for key, value in self.environment.items():
            refused = reserved_config.refused_variable(key)
            if refused is not None:
                problems.append(Problem(subject, f"environment.{key}", f"is refused by the serving container: {refused}"))
            elif key in env or key.startswith((serving_env.VARIABLE_PREFIX, serving_env.SAGEMAKER_VLLM_FLAG_PREFIX)):
                problems.append(
                    Problem(subject, f"environment.{key}", "is managed by the construct; use the typed option instead")
                )
            elif not isinstance(value, str):
                problems.append(Problem(subject, f"environment.{key}", f"must be a string, got {value!r}"))
            else:
                env[key] = value
        for key, value in env.items():
            if len(value) > ENVIRONMENT_VALUE_MAX_LENGTH:
                problems.append(
                    Problem(
                        subject,
                        f"environment.{key}",
                        f"is {len(value)} characters; SageMaker allows {ENVIRONMENT_VALUE_MAX_LENGTH}",
                    )
                )
        return env, problems
