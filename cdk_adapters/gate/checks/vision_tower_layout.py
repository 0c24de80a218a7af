"""Tower LoRA tensors must be keyed the way the pinned vLLM maps them, or it silently ignores them.

transformers 5 saves a CLIP/SigLIP tower without its ``vision_model`` level; vLLM 0.31 registers
such an adapter without a word and applies only its language-model part (`vlm_traps`).
"""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate import vlm_traps
from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext, listed
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    assert context.facts is not None  # needs_facts: the rule runs only where the facts are known
    misplaced = vlm_traps.misplaced_tower_paths(context.facts.vision_modules, context.base.vision_tower_type)
    if misplaced:
        trap = vlm_traps.TRANSFORMERS5_TOWER_ADAPTER
        yield context.problem(
            "weights",
            f"the vision tower LoRA tensors name modules vLLM {trap.vllm_version} does not map ({listed(misplaced)}): "
            "this is transformers 5's key layout, and vLLM would load the adapter but silently ignore these "
            "tensors; re-key each tensor name's 'vision_tower.' to 'vision_tower.vision_model.' in "
            f"adapter_model.safetensors (e.g. {vlm_traps.rekeyed(misplaced[0])})",
        )


CHECK = AdapterRule(
    id="vision-tower-layout",
    description="vision tower LoRA tensors are keyed in the layout the pinned vLLM maps (vision_tower.vision_model.*)",
    run=_run,
    needs_base=True,
)
