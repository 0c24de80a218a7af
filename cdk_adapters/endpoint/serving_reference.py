"""The serving reference between the gate's types and the discovery record's plain document.

The platform's endpoint publishes the `gate.Reference` it checks adapters against (and its
adapter locations, with the tenant each is assigned to) in its discovery record; an imported endpoint in another team's app turns the
record's `ServingReference` back into a `gate.Reference`, so the same gate refuses the same
adapter in either app, with the same rule id and message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.contract.discovery import ServedBaseModel, ServingReference
from cdk_adapters.gate import BaseModelFacts, Reference
from cdk_adapters.gate.ranks import served_max_lora_rank


def publish(reference: Reference, locations: Sequence[AdapterLocation]) -> ServingReference:
    """The record's form of what an endpoint checks adapters against."""
    base = reference.base
    served = None
    if base is not None:
        # The record's fields are the facts' (a test holds the two to one list); sets become sorted tuples.
        served = ServedBaseModel(**{field.name: _as_record_value(getattr(base, field.name)) for field in fields(ServedBaseModel)})
    return ServingReference(
        base_model=served,
        max_lora_rank=served_max_lora_rank(reference.max_lora_rank),
        allow_vision_modules=reference.allow_vision_modules,
        adapter_locations=tuple(_url(location) for location in locations),
        tenant_locations=tuple(
            sorted({(location.tenant, _url(location)) for location in locations if location.tenant is not None})
        ),
    )


def _as_record_value(value: Any) -> Any:
    return tuple(sorted(value)) if isinstance(value, frozenset) else value


def _as_facts_value(value: Any) -> Any:
    return frozenset(value) if isinstance(value, tuple) else value


def _url(location: AdapterLocation) -> str:
    return f"s3://{location.bucket_name}/{location.prefix}"


def gate_reference(serving: ServingReference) -> Reference:
    """The `gate.Reference` a published serving reference stands for."""
    base = serving.base_model
    facts = None
    if base is not None:
        facts = BaseModelFacts(**{field.name: _as_facts_value(getattr(base, field.name)) for field in fields(ServedBaseModel)})
    return Reference(facts, serving.max_lora_rank, serving.allow_vision_modules)


def adapter_locations(serving: ServingReference, tenant: str | None = None) -> list[AdapterLocation]:
    """The published locations (their KMS keys are the platform's: the role holds the grants);
    with `tenant`, only those the platform assigned to that tenant."""
    if tenant is None:
        return [AdapterLocation.from_s3_url(url) for url in serving.adapter_locations]
    return [AdapterLocation.from_s3_url(url, tenant=tenant) for url in serving.locations_of(tenant)]
