"""LoRA ranks vLLM can be configured to serve.

vLLM's ``--max-lora-rank`` accepts only these values; an adapter whose rank exceeds the
configured maximum is refused at load time.
"""

from __future__ import annotations

from collections.abc import Iterable

ALLOWED_MAX_LORA_RANKS: tuple[int, ...] = (1, 8, 16, 32, 64, 128, 256, 320, 512)

VLLM_DEFAULT_MAX_LORA_RANK = 16
"""What vLLM serves when ``--max-lora-rank`` is not given."""


def smallest_allowed_max_lora_rank(ranks: Iterable[int]) -> int:
    """The smallest ``--max-lora-rank`` vLLM accepts that covers every rank given."""
    highest = max(ranks, default=1)
    for allowed in ALLOWED_MAX_LORA_RANKS:
        if allowed >= highest:
            return allowed
    raise ValueError(f"rank {highest} exceeds the largest max_lora_rank vLLM accepts ({ALLOWED_MAX_LORA_RANKS[-1]})")


def served_max_lora_rank(configured: int | None) -> int:
    """The ``--max-lora-rank`` vLLM serves: the configured one, else vLLM's default."""
    return configured if configured is not None else VLLM_DEFAULT_MAX_LORA_RANK


def smallest_tier_holding(rank: int, tier_ranks: Iterable[int]) -> int | None:
    """The smallest tier rank that serves an adapter of `rank`, or None when none does.

    The one placement rule of rank tiers: the endpoint that owns the tiers and a tenant stack
    importing them both attach an adapter's component to this tier's base component.
    """
    return min((tier for tier in tier_ranks if tier >= rank), default=None)
