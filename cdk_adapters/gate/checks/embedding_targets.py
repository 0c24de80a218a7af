"""LoRA on embeddings or `lm_head`, and trainable tokens, are outside what we can serve with vLLM."""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate.adapter_facts import EMBEDDING_MODULES
from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext, listed
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    assert context.facts is not None  # needs_facts: the rule runs only where the facts are known
    embedding_targets = [module for module in context.facts.target_modules if module in EMBEDDING_MODULES]
    if embedding_targets:
        yield context.problem(
            "target_modules",
            f"vLLM cannot serve LoRA on embedding or output layers ({listed(embedding_targets)}); "
            "retrain targeting only attention/MLP projections, or merge the adapter into the base model",
        )
    if context.facts.trainable_token_indices:
        yield context.problem(
            "trainable_token_indices",
            "vLLM cannot serve adapters that train new token embeddings (trainable_token_indices); "
            "retrain without them or merge the adapter into the base model",
        )


CHECK = AdapterRule(
    id="embedding-targets",
    description="no LoRA on embed_tokens/lm_head (or other embedding layers) and no trainable tokens",
    run=_run,
)
