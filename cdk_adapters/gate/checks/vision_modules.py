"""Vision tower and connector LoRA need the multimodal LoRA path, which is opt-in per deployment."""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext, listed
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    assert context.facts is not None  # needs_facts: the rule runs only where the facts are known
    if context.facts.vision_modules and not context.allow_vision_modules:
        yield context.problem(
            "target_modules",
            f"the adapter targets vision tower/connector modules ({listed(context.facts.vision_modules)}), "
            "which vLLM serves only for vision-language models with multimodal LoRA enabled; retrain targeting "
            "the language model only, or set allow_vision_modules: true in the manifest's base_model",
        )


CHECK = AdapterRule(
    id="vision-modules",
    description="no vision tower/connector targets unless allow_vision_modules is set",
    run=_run,
)
