"""The compatibility gate: one implementation used at synth, by `cdk-adapters validate`, and by
the serving container when SageMaker registers an adapter. Standard-library only."""

from cdk_adapters.compat.ranks import ALLOWED_MAX_LORA_RANKS, smallest_allowed_max_lora_rank

__all__ = ["ALLOWED_MAX_LORA_RANKS", "smallest_allowed_max_lora_rank"]
