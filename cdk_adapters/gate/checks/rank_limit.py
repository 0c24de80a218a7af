"""Every module's rank (``r`` and any ``rank_pattern`` entry) must fit vLLM's ``--max-lora-rank``."""

from __future__ import annotations

from collections.abc import Iterator

from cdk_adapters.gate.checks.base import AdapterRule, AdapterRuleContext
from cdk_adapters.gate.ranks import ALLOWED_MAX_LORA_RANKS
from cdk_adapters.problems import Problem


def _run(context: AdapterRuleContext) -> Iterator[Problem]:
    facts = context.facts
    assert facts is not None  # needs_facts: the rule runs only where the facts are known
    if facts.max_rank is None:
        return
    field = "rank_pattern" if facts.rank is not None and facts.max_rank > facts.rank else "r"
    limit = context.max_lora_rank
    if limit is None:
        largest = ALLOWED_MAX_LORA_RANKS[-1]
        if facts.max_rank > largest:
            yield context.problem(
                field,
                f"rank {facts.max_rank} exceeds the largest max_lora_rank vLLM accepts ({largest}); retrain with a lower rank",
            )
    elif facts.max_rank > limit:
        yield context.problem(
            field,
            f"rank {facts.max_rank} exceeds max_lora_rank {limit}, so vLLM would refuse it; retrain with "
            f"rank <= {limit} or raise max_lora_rank (allowed values: "
            f"{', '.join(str(rank) for rank in ALLOWED_MAX_LORA_RANKS)}; larger costs GPU memory)",
        )


CHECK = AdapterRule(
    id="rank-limit",
    description="the highest rank (r and rank_pattern) is at most max_lora_rank (or 512 when derived)",
    run=_run,
)
