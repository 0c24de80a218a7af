"""Where SageMaker places the base component's copies (its ``SchedulingConfig``), and whether
each instance caches the model and image (``DataCacheConfig``).

Both are set on the base component only: adapter components take no specification beyond the
base component's name and their artifact, and whether they accept or inherit either setting is
undocumented. Adapters run inside the base component's copies, so they follow its placement.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_sagemaker as sagemaker

from cdk_adapters.problems import Problem

STRATEGIES = ("SPREAD", "BINPACK")
"""``PlacementStrategy``'s values (SageMaker API ``InferenceComponentSchedulingConfig``)."""
ENFORCEMENT_MODE = "PERMISSIVE"
"""``AvailabilityZoneBalance.EnforcementMode``'s only value: balance when capacity allows."""
MAX_IMBALANCE_RANGE = (0, 100)


@dataclass(frozen=True)
class CopyPlacement:
    """How the base component's copies are spread.

    CloudFormation requires the zone balance alongside the strategy, so it is always rendered
    (``PERMISSIVE``, the only mode: SageMaker balances zones when capacity allows and still
    places a copy when it cannot). The strategy then applies within each zone.
    """

    strategy: str = "SPREAD"
    """``SPREAD`` (copies evenly over instances: losing one instance loses fewest copies) or
    ``BINPACK`` (fewer instances busy, so managed scaling can release the rest). Default SPREAD."""
    max_zone_imbalance: int = 0
    """Most copies by which two Availability Zones may differ (with instances in two or more
    zones), 0 to 100. Default 0 (SageMaker's)."""

    def problems(self, subject: str) -> list[Problem]:
        found: list[Problem] = []
        if self.strategy not in STRATEGIES:
            found.append(
                Problem(
                    subject, "base_copies.placement.strategy", f"must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}"
                )
            )
        low, high = MAX_IMBALANCE_RANGE
        value = self.max_zone_imbalance
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            found.append(
                Problem(
                    subject, "base_copies.placement.max_zone_imbalance", f"must be an integer from {low} to {high}, got {value!r}"
                )
            )
        return found

    def render(self) -> sagemaker.CfnInferenceComponent.InferenceComponentSchedulingConfigProperty:
        ic = sagemaker.CfnInferenceComponent
        return ic.InferenceComponentSchedulingConfigProperty(
            placement_strategy=self.strategy,
            availability_zone_balance=ic.InferenceComponentAvailabilityZoneBalanceProperty(
                enforcement_mode=ENFORCEMENT_MODE, max_imbalance=self.max_zone_imbalance
            ),
        )


def data_cache_problems(data_cache: object, subject: str) -> list[Problem]:
    if data_cache is None or isinstance(data_cache, bool):
        return []
    return [Problem(subject, "instances.data_cache", f"must be True, False or None, got {data_cache!r}")]


def render_data_cache(
    data_cache: bool | None,
) -> sagemaker.CfnInferenceComponent.InferenceComponentDataCacheConfigProperty | None:
    if data_cache is None:
        return None
    return sagemaker.CfnInferenceComponent.InferenceComponentDataCacheConfigProperty(enable_caching=data_cache)
