"""No adapter on a base/flag combination known to kill the pinned vLLM engine (`vlm_traps`).

With tower/connector LoRA on, LLaVA's ``vision_feature_select_strategy="default"`` makes the first
adapter request carrying an image crash the engine for every tenant, whatever the adapter targets.
"""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate import vlm_traps
from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    base = context.base
    if vlm_traps.crashes_engine(base.architecture, base.vision_feature_select_strategy, context.serves_tower_lora):
        trap = vlm_traps.LLAVA_DEFAULT_STRATEGY
        yield context.problem(
            "base_model.vision_feature_select_strategy",
            f"{base.architecture} with vision_feature_select_strategy '{base.vision_feature_select_strategy}' and "
            f"--enable-tower-connector-lora crashes vLLM {trap.vllm_version}: {trap.consequence}; serve a base whose "
            "config.json sets vision_feature_select_strategy 'full' (and train the adapter on it), or turn tower/"
            "connector LoRA off (language-model-only adapters)",
        )


CHECK = AdapterRule(
    id="vlm-engine-traps",
    description="no adapter on a base and tower-LoRA setting known to crash the pinned vLLM engine",
    run=_run,
    needs_base=True,
)
