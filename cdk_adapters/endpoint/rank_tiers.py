"""Rank tiers: more base components of the endpoint's one model, for adapters of higher rank.

vLLM sizes every adapter slot at ``--max-lora-rank`` and runs its LoRA kernels over the padded
rank, so one rank-64 adapter slows every rank-16 adapter's LoRA work on the whole endpoint
(docs/rank-tiers.md has the measured figures). A tier is one more base inference component of the
same weights whose container serves a higher rank, with its own ``max_loras``, copies and
scaling; each adapter component attaches to the smallest tier whose rank holds its own
(`smallest_tier_holding`, the rule imports share). The endpoint's own base component is the first
tier (``vllm.max_lora_rank``): an endpoint without `RankTier`s is the endpoint as it always was,
template for template.

Each tier's copy loads the base weights again, so tiers trade GPU memory and instances for the
small-rank tenants' latency; `cdk-adapters plan` prices that trade.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import jsii
from aws_cdk import Lazy
from constructs import Construct, IValidation

from cdk_adapters.endpoint.adapter_settings import ServingEnvironment
from cdk_adapters.endpoint.components import BaseInferenceComponent
from cdk_adapters.endpoint.names import tier_component_name
from cdk_adapters.gate.ranks import ALLOWED_MAX_LORA_RANKS, served_max_lora_rank
from cdk_adapters.hosting.compute import copies_fit_problems
from cdk_adapters.hosting.copy_placement import render_data_cache
from cdk_adapters.hosting.endpoint_hosting import VARIANT_NAME, HostedModel
from cdk_adapters.hosting.instance_types import instance_type as instance_type_row
from cdk_adapters.hosting.logs import COMPONENT_LOG_GROUP_PREFIX, allow_logs_to_use_key, log_group
from cdk_adapters.hosting.networking import VpcPlacement
from cdk_adapters.hosting.rolling_update import RollingUpdate
from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.problems import Problem

MultiAdapterEndpoint = Any
"""The endpoint creating the tiers (typed loosely: `cdk_adapters.endpoint.endpoint` imports this module)."""
SEPARATE_WEIGHTS = "each tier's copy loads the base model's weights again"
TIER_ENGINE_FIELDS = frozenset({"vllm.max_loras", "vllm.max_cpu_loras"})


@dataclass(frozen=True)
class RankTier:
    """A base component for adapters of rank up to `max_lora_rank`, beside the endpoint's own."""

    max_lora_rank: int
    """Highest rank this tier serves: one of vLLM's ranks, above the endpoint's ``vllm.max_lora_rank``."""
    max_loras: int | None = None
    """Adapters on one copy's GPU at once. Default: the endpoint's ``vllm.max_loras``."""
    max_cpu_loras: int | None = None
    """Adapters in one copy's host cache (>= `max_loras`). Default: the endpoint's ``vllm.max_cpu_loras``."""
    copy_count: int = 1
    """Copies at creation; autoscale them with ``tier.base_component.auto_scale_copy_count(...)``."""

    def engine(self, vllm: VllmOptions) -> VllmOptions:
        """The endpoint's engine options with this tier's rank and LoRA slots."""
        return replace(
            vllm,
            max_lora_rank=self.max_lora_rank,
            max_loras=self.max_loras if self.max_loras is not None else vllm.max_loras,
            max_cpu_loras=self.max_cpu_loras if self.max_cpu_loras is not None else vllm.max_cpu_loras,
        )


def fixed_tiers(tiers: Any) -> Any:
    """The `rank_tiers` prop as built: a copy of a list (changing the caller's list later changes
    nothing), anything else kept for `tier_problems` to name."""
    return tuple(tiers) if isinstance(tiers, (list, tuple)) else tiers or ()


def tier_problems(tiers: object, vllm: VllmOptions, subject: str, deployment: RollingUpdate | None = None) -> list[Problem]:
    """Every problem with `rank_tiers`: kinds, ranks (allowed, above the first tier's, distinct),
    copies (enough for the endpoint's rolling update, which each tier's base component runs), engines."""
    if tiers is None:
        return []
    if not isinstance(tiers, (list, tuple)):
        return [Problem(subject, "rank_tiers", f"must be a list of RankTier, got {type(tiers).__name__}")]
    found: list[Problem] = []
    first = served_max_lora_rank(vllm.max_lora_rank)
    seen: set[int] = set()
    for index, tier in enumerate(tiers):
        field = f"rank_tiers[{index}]"
        if not isinstance(tier, RankTier):
            found.append(Problem(subject, field, f"must be a RankTier, got {type(tier).__name__}"))
            continue
        rank = tier.max_lora_rank
        if type(rank) is not int or rank not in ALLOWED_MAX_LORA_RANKS:
            allowed = ", ".join(map(str, ALLOWED_MAX_LORA_RANKS))
            found.append(Problem(subject, f"{field}.max_lora_rank", f"vLLM accepts only {allowed}; got {rank!r}"))
            continue
        if rank <= first:
            found.append(
                Problem(
                    subject,
                    f"{field}.max_lora_rank",
                    f"({rank}) must be above the first tier's, vllm.max_lora_rank ({first}): the endpoint's own base "
                    "component is the first tier",
                )
            )
        if rank in seen:
            found.append(Problem(subject, f"{field}.max_lora_rank", f"({rank}) is another tier's rank already"))
        seen.add(rank)
        copies = tier.copy_count
        if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
            found.append(Problem(subject, f"{field}.copy_count", f"must be a positive integer, got {copies!r}"))
        elif isinstance(deployment, RollingUpdate):
            found += [
                Problem(subject, f"{field}.copy_count", f"({copies}), with the endpoint's rolling update: {problem.message}")
                for problem in deployment.problems(subject, copies, ())
                if problem.field == "deployment.maximum_batch_size"
            ]
        for problem in tier.engine(vllm).problems(subject):
            if problem.field in TIER_ENGINE_FIELDS:  # the endpoint's own options report the rest once
                found.append(Problem(subject, f"{field}.{problem.field.removeprefix('vllm.')}", problem.message))
    return found


def tiers_ranks(vllm: VllmOptions, tiers: object) -> tuple[int, ...]:
    """Every tier's rank, the first (``vllm.max_lora_rank``) first; entries `tier_problems` refuses are left out."""
    above = (
        sorted(
            {
                t.max_lora_rank
                for t in tiers
                if isinstance(t, RankTier) and type(t.max_lora_rank) is int and t.max_lora_rank in ALLOWED_MAX_LORA_RANKS
            }
        )
        if isinstance(tiers, (list, tuple))
        else []
    )
    first = served_max_lora_rank(vllm.max_lora_rank)
    return (first, *(rank for rank in above if rank > first))


class ServedTier(Construct):
    """One tier above the first: its model (its own rank in the environment), base component and log group."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        tier: RankTier,
        endpoint: MultiAdapterEndpoint,
        model: HostedModel,
        vpc_placement: VpcPlacement | None,
    ) -> None:
        super().__init__(scope, id)
        self.tier = tier
        self.max_lora_rank = tier.max_lora_rank
        self.inference_component_name = tier_component_name(endpoint.prefix, tier.max_lora_rank)
        self.log_group_name = COMPONENT_LOG_GROUP_PREFIX + self.inference_component_name
        self.log_group = log_group(self, "Logs", endpoint.log_settings, self.log_group_name)
        allow_logs_to_use_key(self, endpoint.log_settings, [self.log_group_name])
        self.model = endpoint.hosting.create_model(self, "Model", role=endpoint.role, model=model, vpc_placement=vpc_placement)
        self.model.node.add_dependency(endpoint.permissions.policy)
        self.base_component = BaseInferenceComponent(
            self,
            "BaseComponent",
            inference_component_name=self.inference_component_name,
            model_name=self.model.attr_model_name,
            copy_count=tier.copy_count,
            **base_component_options(endpoint),
        )
        self.base_component.node.add_dependency(endpoint.permissions.policy)
        for group in (*endpoint.log_groups.resources, self.log_group.node.default_child):
            self.base_component.resource.add_resource_dependency(group)


def base_component_options(endpoint: MultiAdapterEndpoint) -> dict[str, Any]:
    """What every tier's base component shares, the first tier's included: the endpoint, variant,
    reservation, timeouts, metrics endpoint, copy placement and data cache."""
    hosting = endpoint.hosting
    return {
        "endpoint_name": endpoint.endpoint.attr_endpoint_name,
        "variant_name": VARIANT_NAME,
        "compute": endpoint.compute,
        "startup": endpoint.base_copies.startup,
        "instance_scaling": hosting.instance_scaling,
        "container": hosting.observability.render_container(endpoint.monitoring.settings.emf),
        "scheduling": hosting.copy_placement.render() if hosting.copy_placement is not None else None,
        "data_cache": render_data_cache(hosting.data_cache),
    }


def create_tiers(
    endpoint: MultiAdapterEndpoint, *, model: HostedModel, environment: dict[str, str], vpc: VpcPlacement | None
) -> list[ServedTier]:
    """The endpoint's tiers above the first, by rank (never by the order given): each one's model
    (with the container environment of its own engine), base component (with the endpoint's
    rolling update) and log group."""
    served = []
    engine_keys = set(endpoint.vllm.environment())
    for tier in sorted(endpoint.rank_tier_settings, key=lambda t: t.max_lora_rank):
        own = {key: value for key, value in environment.items() if key not in engine_keys}
        own.update(tier.engine(endpoint.vllm).environment())
        tier_model = HostedModel(
            model.image_uri, Lazy.any(ServingEnvironment(endpoint.adapter_settings, own)), model.model_data_source
        )
        served_tier = ServedTier(
            endpoint, f"RankTier{tier.max_lora_rank}", tier=tier, endpoint=endpoint, model=tier_model, vpc_placement=vpc
        )
        if endpoint.deployment is not None:
            served_tier.base_component.resource.deployment_config = endpoint.deployment.render(endpoint.endpoint_alarms)
        served.append(served_tier)
    if served:
        endpoint.permissions.add_log_groups([tier.log_group_name for tier in served])
        endpoint.node.add_validation(_TierCapacityValidation(endpoint, served, f"MultiAdapterEndpoint {endpoint.node.path!r}"))
    return served


@jsii.implements(IValidation)
class _TierCapacityValidation:
    """At synth (after any autoscaling is set): every tier's copies fit on the instances together."""

    def __init__(self, endpoint: MultiAdapterEndpoint, tiers: Sequence[ServedTier], subject: str) -> None:
        self._endpoint = endpoint
        self._tiers = tiers
        self._subject = subject

    def validate(self) -> list[str]:
        endpoint = self._endpoint
        hosting = endpoint.hosting
        scaling = hosting.instance_scaling
        if any(instance_type_row(name) is None for name in scaling.instance_types):
            return []  # an unknown type: what one instance holds is not known here
        bases = [endpoint.base_component] + [tier.base_component for tier in self._tiers]
        initial = sum(base.copy_count for base in bases)
        most = sum(base.copy_scaling.max_copies if base.copy_scaling is not None else base.copy_count for base in bases)
        found = copies_fit_problems(
            self._subject,
            scaling,
            copies=initial,
            copies_field="the tiers' copies at creation (base_copies.count + each RankTier's copy_count)",
            instance_count=hosting.initial_instance_count,
            count_field="instances.initial_count",
        ) or copies_fit_problems(
            self._subject,
            scaling,
            copies=most,
            copies_field="the tiers' most copies (each tier's max_copies, or its copy count when not autoscaled)",
            instance_count=hosting.max_instance_count,
            count_field="instances.max_count",
        )
        return [f"{problem.subject}: {problem.field}: {problem.message}; {SEPARATE_WEIGHTS}" for problem in found]
