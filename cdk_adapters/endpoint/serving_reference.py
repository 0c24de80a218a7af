"""The serving reference between the gate's types and the discovery record's plain document.

The platform's endpoint publishes the `gate.Reference` it checks adapters against (and its
adapter locations, with the tenant each is assigned to) in its discovery record; an imported endpoint in another team's app turns the
record's `ServingReference` back into a `gate.Reference`, so the same gate refuses the same
adapter in either app, with the same rule id and message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.contract.discovery import ServedBaseModel, ServingReference
from cdk_adapters.gate import BaseModelFacts, Reference
from cdk_adapters.gate.ranks import served_max_lora_rank
from cdk_adapters.problems import Problem

if TYPE_CHECKING:
    from cdk_adapters.endpoint.serving_policy import ServingPolicy
    from cdk_adapters.hosting.vllm_options import VllmOptions


def publish(
    reference: Reference, locations: Sequence[AdapterLocation], *, tiers: tuple[tuple[int, str], ...] = ()
) -> ServingReference:
    """The record's form of what an endpoint checks adapters against; with rank `tiers`
    (``(rank, base component)``, the first tier first), ``max_lora_rank`` is the first tier's."""
    base = reference.base
    served = None
    if base is not None:
        # The record's fields are the facts' (a test holds the two to one list); sets become sorted tuples.
        served = ServedBaseModel(**{field.name: _as_record_value(getattr(base, field.name)) for field in fields(ServedBaseModel)})
    return ServingReference(
        base_model=served,
        max_lora_rank=tiers[0][0] if tiers else served_max_lora_rank(reference.max_lora_rank),
        allow_vision_modules=reference.allow_vision_modules,
        adapter_locations=tuple(_url(location) for location in locations),
        tenant_locations=tuple(
            sorted({(location.tenant, _url(location)) for location in locations if location.tenant is not None})
        ),
        tiers=tiers,
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
    return Reference(facts, serving.largest_rank, serving.allow_vision_modules)


def adapter_locations(serving: ServingReference, tenant: str | None = None) -> list[AdapterLocation]:
    """The published locations (their KMS keys are the platform's: the role holds the grants);
    with `tenant`, only those the platform assigned to that tenant."""
    if tenant is None:
        return [AdapterLocation.from_s3_url(url) for url in serving.adapter_locations]
    return [AdapterLocation.from_s3_url(url, tenant=tenant) for url in serving.locations_of(tenant)]


def owned_reference(
    policy: ServingPolicy, vllm: VllmOptions, facts: object, subject: str, *, tier_ranks: Sequence[int]
) -> tuple[Reference, list[Problem]]:
    """The owning endpoint's gate reference, served rank up to its largest tier's; the identity in
    `base_model.facts` must agree with its model_id/revision (missing fields are taken from them,
    as the container does from its environment)."""
    problems: list[Problem] = []
    if facts is not None and not isinstance(facts, BaseModelFacts):
        problems.append(Problem(subject, "base_model.facts", f"must be a BaseModelFacts, got {type(facts).__name__}"))
        facts = None
    if isinstance(facts, BaseModelFacts):
        for field, stated, prop, pinned in (
            ("model_id", facts.model_id, "base_model.model_id", policy.base_model_id),
            ("revision", facts.revision, "base_model.revision", policy.base_model_revision),
        ):
            if stated is not None and pinned is not None and stated != pinned:
                message = f"is {stated!r} but {prop} is {pinned!r}; both describe the one base model"
                problems.append(Problem(subject, f"base_model.facts.{field}", message))
        facts = replace(
            facts, model_id=facts.model_id or policy.base_model_id, revision=facts.revision or policy.base_model_revision
        )
    rank = max(tier_ranks, default=served_max_lora_rank(vllm.max_lora_rank))
    return Reference(facts, rank, bool(policy.allow_vision_modules), vllm.enable_tower_connector_lora), problems
