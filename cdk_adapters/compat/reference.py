"""What an adapter is checked against: one value instead of three arguments passed side by side.

Every gate (synth, `cdk-adapters validate`, the serving container at registration) compares an
adapter with the same three things: the base model's facts, the highest rank the server loads,
and whether vision tower/connector modules are admitted. Passing them as one typed value keeps
the gates from drifting apart (one forgetting the vision flag, another the rank).
"""

from __future__ import annotations

from dataclasses import dataclass

from cdk_adapters.compat.base_model import BaseModelFacts


@dataclass(frozen=True)
class Reference:
    """The base model and serving limits adapters must fit."""

    base: BaseModelFacts
    max_lora_rank: int | None = None
    """vLLM's ``--max-lora-rank``; None: derived from the adapters, so only vLLM's largest bounds them."""
    allow_vision_modules: bool = False
    """Admit adapters that target a vision-language model's vision tower or connector."""
