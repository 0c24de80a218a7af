"""The manifest's ``serving:`` block: vLLM's LoRA capacity, and the rank tiers that split it (docs/rank-tiers.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cdk_adapters.gate.ranks import ALLOWED_MAX_LORA_RANKS


class StrictModel(BaseModel):
    """Every manifest block: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class TierSpec(StrictModel):
    """One rank tier (docs/rank-tiers.md): a base component serving adapters up to `max_lora_rank`."""

    max_lora_rank: int
    """Highest rank this tier serves; one of 1, 8, 16, 32, 64, 128, 256, 320, 512."""
    max_loras: int | None = Field(default=None, ge=1)
    """Adapters on one copy's GPU at once. Default: ``serving.max_loras``."""
    max_cpu_loras: int | None = Field(default=None, ge=1)
    """Adapters in one copy's host cache. Default: ``serving.max_cpu_loras``."""
    copies: int | None = Field(default=None, ge=1)
    """Copies at creation, for a tier after the first (the first tier's are the environment's copy count). Default 1."""
    min_copies: int | None = Field(default=None, ge=0)
    """With `max_copies`: autoscale this tier's copies in that range, on the environment's scaling
    targets (the example app's ``copy_scaling``). Default: not autoscaled."""
    max_copies: int | None = Field(default=None, ge=1)
    """The most copies autoscaling may run of this tier (with `min_copies`)."""

    @model_validator(mode="after")
    def _range_given_whole(self) -> TierSpec:
        if (self.min_copies is None) != (self.max_copies is None):
            raise ValueError("min_copies and max_copies: give both (an autoscaled tier) or neither")
        return self

    @field_validator("max_lora_rank")
    @classmethod
    def _allowed_rank(cls, value: int) -> int:
        if value not in ALLOWED_MAX_LORA_RANKS:
            raise ValueError(f"vLLM accepts only {', '.join(map(str, ALLOWED_MAX_LORA_RANKS))}")
        return value


class ServingLimits(StrictModel):
    """vLLM's LoRA capacity: GPU-resident adapters, host cache, and the highest rank."""

    max_loras: int = Field(default=4, ge=1)
    """Adapters on the GPU at once; a batch mixes at most this many."""
    max_cpu_loras: int | None = Field(default=None, ge=1)
    """Adapters cached in host memory (>= max_loras). Default: vLLM's (= max_loras)."""
    max_lora_rank: int | None = None
    """Highest rank served; one of 1, 8, 16, 32, 64, 128, 256, 320, 512. Default: the smallest that covers every adapter."""

    @field_validator("max_lora_rank")
    @classmethod
    def _allowed_rank(cls, value: int | None) -> int | None:
        if value is not None and value not in ALLOWED_MAX_LORA_RANKS:
            raise ValueError(f"vLLM accepts only {', '.join(map(str, ALLOWED_MAX_LORA_RANKS))}")
        return value

    tiers: list[TierSpec] | None = None
    """Rank tiers, by rising rank, the first being the endpoint's own base component; each
    adapter attaches to the smallest that holds its rank. Default: one tier."""

    @model_validator(mode="after")
    def _tiers_rise(self) -> ServingLimits:
        tiers = self.tiers
        if tiers is None:
            return self
        ranks = [tier.max_lora_rank for tier in tiers]
        if len(tiers) < 2:
            raise ValueError("tiers: list at least two (one tier is the default: leave tiers out)")
        if ranks != sorted(set(ranks)):
            raise ValueError(f"tiers: ranks must rise, each once; got {ranks}")
        if self.max_lora_rank is not None and self.max_lora_rank != ranks[0]:
            raise ValueError(f"max_lora_rank ({self.max_lora_rank}) must be the first tier's ({ranks[0]}), or left out")
        if tiers[0].copies is not None or tiers[0].max_copies is not None:
            raise ValueError(
                "tiers[0].copies, min_copies, max_copies: the first tier is the endpoint's own base component; "
                "its copies and their scaling are the environment's"
            )
        for index, tier in enumerate(tiers):
            loras, cpu = self.tier_slots(tier)
            if cpu < loras:
                raise ValueError(
                    f"tiers[{index}]: max_cpu_loras ({cpu}) must be >= max_loras ({loras}): the host cache holds every "
                    "adapter that is on the GPU"
                )
        return self

    def tier_slots(self, tier: TierSpec) -> tuple[int, int]:
        """A tier's (max_loras, max_cpu_loras): its own, else serving's; the host cache defaults to
        the GPU slots, as vLLM's does."""
        loras = tier.max_loras if tier.max_loras is not None else self.max_loras
        cpu = tier.max_cpu_loras if tier.max_cpu_loras is not None else self.max_cpu_loras
        return loras, cpu if cpu is not None else loras

    @property
    def tier_ranks(self) -> tuple[int, ...]:
        """The tiers' ranks, first first; empty without tiers."""
        return tuple(tier.max_lora_rank for tier in self.tiers or ())

    @model_validator(mode="after")
    def _cache_holds_resident(self) -> ServingLimits:
        if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras:
            raise ValueError(
                f"max_cpu_loras ({self.max_cpu_loras}) must be >= max_loras ({self.max_loras}): "
                "the host cache holds every adapter that is on the GPU"
            )
        return self
