"""The canary entry of the discovery record (its optional ``canary`` key).

A canary endpoint serves copies of a few adapters on a candidate base model or image, where base
upgrades are validated first; a client sends it a share of those adapters' calls. Readers that do
not know the key ignore it and call the main endpoint only (`discovery.DiscoveryRecord.canary`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from cdk_adapters.contract.adapter_names import adapter_component_name, adapter_name_key


@dataclass(frozen=True)
class CanaryRecord:
    """A canary endpoint: copies of a few adapters on a candidate base model or image, where
    base upgrades are validated first. A client sends it `traffic_percent` of the calls to the
    adapters it serves; the other calls, and every other adapter, stay on the main endpoint."""

    endpoint_name: str
    base_inference_component_name: str
    component_prefix: str
    adapters: tuple[str, ...]
    """Adapter names the canary serves (each one the main endpoint serves too)."""
    traffic_percent: int
    """Share of those adapters' calls meant for the canary, 1 to 50."""

    def serves(self, adapter_name: str) -> bool:
        return adapter_name_key(adapter_name) in {adapter_name_key(name) for name in self.adapters}

    def component_name(self, adapter_name: str) -> str:
        """The canary's component for `adapter_name` (same naming rule, its own prefix)."""
        return adapter_component_name(self.component_prefix, adapter_name)

    def takes(self, adapter_name: str, rng: random.Random | None = None) -> bool:
        """Whether this call to `adapter_name` goes to the canary (a weighted coin)."""
        return self.serves(adapter_name) and (rng or random).random() * 100 < self.traffic_percent

    def to_document(self) -> dict[str, Any]:
        return {
            "endpoint_name": self.endpoint_name,
            "base_inference_component_name": self.base_inference_component_name,
            "component_prefix": self.component_prefix,
            "adapters": list(self.adapters),
            "traffic_percent": self.traffic_percent,
        }

    @classmethod
    def from_document(cls, document: object) -> tuple[CanaryRecord | None, list[str]]:
        """The canary and every problem with it (``canary.<field>: ...``)."""
        if not isinstance(document, dict):
            return None, ["'canary' must be an object"]
        problems = [
            f"canary.{key} must be a non-empty string"
            for key in ("endpoint_name", "base_inference_component_name", "component_prefix")
            if not isinstance(document.get(key), str) or not document[key]
        ]
        adapters = document.get("adapters")
        if not isinstance(adapters, list) or not adapters or not all(isinstance(a, str) and a for a in adapters):
            problems.append("canary.adapters must be a non-empty list of adapter names")
        percent = document.get("traffic_percent")
        if isinstance(percent, bool) or not isinstance(percent, int) or not 1 <= percent <= 50:
            problems.append(f"canary.traffic_percent must be an integer from 1 to 50, got {percent!r}")
        if problems:
            return None, problems
        assert isinstance(adapters, list) and isinstance(percent, int)  # otherwise a problem was found above
        return (
            cls(
                endpoint_name=document["endpoint_name"],
                base_inference_component_name=document["base_inference_component_name"],
                component_prefix=document["component_prefix"],
                adapters=tuple(adapters),
                traffic_percent=percent,
            ),
            [],
        )
