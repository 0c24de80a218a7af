"""Tower and connector LoRA is applied only with vLLM's ``--enable-tower-connector-lora``.

Without the flag vLLM logs one warning per module at start-up and serves only the adapter's
language-model part, so an admitted tower adapter would answer wrongly (`vlm_traps`).
"""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate import vlm_traps
from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext, listed
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    # Only once vision modules are admitted: otherwise the vision-modules rule already refuses them.
    assert context.facts is not None  # needs_facts: the rule runs only where the facts are known
    if context.facts.vision_modules and context.allow_vision_modules and not context.serves_tower_lora:
        yield context.problem(
            "target_modules",
            f"the adapter targets vision tower/connector modules ({listed(context.facts.vision_modules)}) but the "
            f"server runs without --enable-tower-connector-lora, so vLLM {vlm_traps.TOWER_LORA_FLAG_OFF.vllm_version} "
            "would ignore them and apply only the language-model part; set vllm enable_tower_connector_lora: true",
        )


CHECK = AdapterRule(
    id="tower-connector-lora",
    description="tower/connector targets are served only with enable_tower_connector_lora on",
    run=_run,
)
