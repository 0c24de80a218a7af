"""What an adapter is checked against: one value instead of three arguments passed side by side.

Every gate (synth, `cdk-adapters validate`, the serving container at registration) compares an
adapter with the same three things: the base model's facts, the highest rank the server loads,
and whether vision tower/connector modules are admitted. Passing them as one typed value keeps
the gates from drifting apart (one forgetting the vision flag, another the rank). The serving
container and `cdk-adapters validate` always know the base; synth knows it when the manifest (or
the endpoint's `base_model.facts`) states it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdk_adapters.gate.base_model import BaseModelFacts


@dataclass(frozen=True)
class Reference:
    """The base model and serving limits adapters must fit."""

    base: BaseModelFacts | None
    """None: the base model's facts are not known here (a `MultiAdapterEndpoint` given no
    `base_model.facts`); the rules that compare with the base (`AdapterRule.needs_base`) skip."""
    max_lora_rank: int | None = None
    """vLLM's ``--max-lora-rank``; None: derived from the adapters, so only vLLM's largest bounds them."""
    allow_vision_modules: bool = False
    """Admit adapters that target a vision-language model's vision tower or connector."""
    tower_connector_lora: bool | None = None
    """Whether vLLM runs with ``--enable-tower-connector-lora``; None: it follows
    `allow_vision_modules` (the construct and local mode turn the flag on with it)."""

    @property
    def serves_tower_lora(self) -> bool:
        return self.allow_vision_modules if self.tower_connector_lora is None else self.tower_connector_lora
