"""The serving reference between the gate's types and the discovery record's plain document.

The platform's endpoint publishes the `gate.Reference` it checks adapters against (and its
adapter locations, with the tenant each is assigned to) in its discovery record; an imported endpoint in another team's app turns the
record's `ServingReference` back into a `gate.Reference`, so the same gate refuses the same
adapter in either app, with the same rule id and message.
"""

from __future__ import annotations

from collections.abc import Sequence

from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.contract.discovery import ServedBaseModel, ServingReference
from cdk_adapters.gate import BaseModelFacts, Reference
from cdk_adapters.gate.ranks import VLLM_DEFAULT_MAX_LORA_RANK


def publish(reference: Reference, locations: Sequence[AdapterLocation]) -> ServingReference:
    """The record's form of what an endpoint checks adapters against."""
    base = reference.base
    served = None
    if base is not None:
        served = ServedBaseModel(
            model_id=base.model_id,
            revision=base.revision,
            hidden_size=base.hidden_size,
            module_names=tuple(sorted(base.module_names)),
            vision_language=base.vision_language,
            module_shapes=None if base.module_shapes is None else tuple(sorted(base.module_shapes)),
            architecture=base.architecture,
            vision_tower_type=base.vision_tower_type,
            vision_feature_select_strategy=base.vision_feature_select_strategy,
        )
    rank = reference.max_lora_rank if reference.max_lora_rank is not None else VLLM_DEFAULT_MAX_LORA_RANK
    return ServingReference(
        base_model=served,
        max_lora_rank=rank,
        allow_vision_modules=reference.allow_vision_modules,
        adapter_locations=tuple(_url(location) for location in locations),
        tenant_locations=tuple(
            sorted({(location.tenant, _url(location)) for location in locations if location.tenant is not None})
        ),
    )


def _url(location: AdapterLocation) -> str:
    return f"s3://{location.bucket_name}/{location.prefix}"


def gate_reference(serving: ServingReference) -> Reference:
    """The `gate.Reference` a published serving reference stands for."""
    base = serving.base_model
    facts = None
    if base is not None:
        facts = BaseModelFacts(
            model_id=base.model_id,
            revision=base.revision,
            module_names=frozenset(base.module_names),
            hidden_size=base.hidden_size,
            vision_language=base.vision_language,
            module_shapes=None if base.module_shapes is None else frozenset(base.module_shapes),
            architecture=base.architecture,
            vision_tower_type=base.vision_tower_type,
            vision_feature_select_strategy=base.vision_feature_select_strategy,
        )
    return Reference(facts, serving.max_lora_rank, serving.allow_vision_modules)


def adapter_locations(serving: ServingReference, tenant: str | None = None) -> list[AdapterLocation]:
    """The published locations (their KMS keys are the platform's: the role holds the grants);
    with `tenant`, only those the platform assigned to that tenant."""
    if tenant is None:
        return [AdapterLocation.from_s3_url(url) for url in serving.adapter_locations]
    return [AdapterLocation.from_s3_url(url, tenant=tenant) for url in serving.locations_of(tenant)]
