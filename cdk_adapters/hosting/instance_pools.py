"""Instance pools: one production variant that may launch any of several instance types.

GPU capacity is what endpoints fail on: when SageMaker cannot get an instance of the first type it
tries the next pool (``ProductionVariant.InstancePools``, tried by ``Priority``, 1 first), for up to
``VariantInstanceProvisionTimeoutInSeconds`` (capacity only; not model download or container
start). One base inference component then runs on every pool, so it needs one specification per
instance type (``Specifications``), each with the reservation that fits that type.

Why two to five pools, when the API takes one to five: the CloudFormation schema of
``AWS::SageMaker::InferenceComponent`` requires at least two ``Specifications`` ("use the singular
Specification for a single instance type"), and whether a one-pool variant accepts a component
with the singular specification is not documented. One type therefore goes through the endpoint's
``instance_type``, which renders exactly as before.

Every pool serves the one model (``ModelNameOverride`` is not offered: the container's environment,
tensor parallelism included, is the model's), so a copy takes the same number of GPUs on every
type. What a copy reserves on a pool defaults to the endpoint's `compute`; the instance table
(`cdk_adapters.hosting.instance_types`) says whether one copy fits each type and how many do, and every
capacity check takes the pool that holds the fewest copies (managed scaling may have launched any).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cdk_adapters.hosting.compute import ComputeRequirements, copies_per_instance, whole_seconds_problems
from cdk_adapters.hosting.instance_storage import has_local_instance_storage
from cdk_adapters.hosting.instance_types import instance_type as instance_type_row
from cdk_adapters.problems import Problem

POOL_COUNT_RANGE = (2, 5)
"""Pools this library accepts: the API's maximum, and CloudFormation's minimum of two per-type
specifications on the inference component (one type: use ``instance_type``)."""
PROVISION_TIMEOUT_RANGE_SECONDS = (300, 3600)
"""``VariantInstanceProvisionTimeoutInSeconds`` as the SageMaker API and CloudFormation accept it."""


@dataclass(frozen=True)
class InstancePool:
    """One instance type a variant may launch; pools are tried in the order given.

    ``MultiAdapterEndpoint(instances=Instances(pools=[InstancePool("ml.g6.2xlarge"), InstancePool("ml.g5.2xlarge")]))``
    launches g6 while SageMaker has them and g5 when it has not.
    """

    instance_type: str
    """SageMaker's name, e.g. ``ml.g5.2xlarge``; must be in the instance table, which says what
    one instance holds."""
    compute: ComputeRequirements | None = None
    """What one copy reserves on this type. Default: the endpoint's `compute` (a copy needs the
    same GPUs and host memory whatever the GPU model). Its ``accelerator_devices`` must equal the
    endpoint's: one model, with one tensor-parallel size, serves every pool."""


def pool_reservations(pools: Sequence[InstancePool], compute: ComputeRequirements) -> tuple[tuple[str, ComputeRequirements], ...]:
    """``(instance type, what one copy reserves there)`` per pool, in priority order."""
    return tuple((pool.instance_type, pool.compute or compute) for pool in pools)


def instance_pool_problems(pools: object, compute: ComputeRequirements, subject: str) -> list[Problem]:
    """Everything wrong with `pools` for an endpoint whose copies reserve `compute`, at once."""
    low, high = POOL_COUNT_RANGE
    if isinstance(pools, (str, bytes)) or not isinstance(pools, Sequence):
        return [Problem(subject, "instances.pools", f"must be a list of InstancePool, got {type(pools).__name__}")]
    found: list[Problem] = []
    if not low <= len(pools) <= high:
        advice = "; for one instance type use Instances(instance_type=...)" if len(pools) < low else ""
        found.append(
            Problem(subject, "instances.pools", f"has {len(pools)} pool(s); SageMaker takes {low} to {high} here{advice}")
        )
    seen: dict[str, int] = {}
    storage: dict[bool, str] = {}
    for index, pool in enumerate(pools):
        field = f"instances.pools[{index}]"
        if not isinstance(pool, InstancePool):
            found.append(Problem(subject, field, f"must be an InstancePool, got {type(pool).__name__}"))
            continue
        name = pool.instance_type
        if not isinstance(name, str) or instance_type_row(name) is None:
            found.append(
                Problem(
                    subject,
                    f"{field}.instance_type",
                    f"{name!r} is not a GPU instance type this library knows (see cdk_adapters/hosting/instance_types.py): "
                    "a pool's GPUs, vCPUs and memory are needed to size its reservation",
                )
            )
            continue
        if name in seen:
            found.append(
                Problem(subject, f"{field}.instance_type", f"{name} is already instances.pools[{seen[name]}]; each type once")
            )
            continue
        seen[name] = index
        storage.setdefault(has_local_instance_storage(name), name)
        if pool.compute is not None and not isinstance(pool.compute, ComputeRequirements):
            found.append(
                Problem(subject, f"{field}.compute", f"must be a ComputeRequirements, got {type(pool.compute).__name__}")
            )
            continue
        reservation = pool.compute or compute
        own = reservation.problems(subject, f"{field}.compute") if pool.compute is not None else []
        found += own
        if own or compute.problems(subject):
            continue
        if reservation.accelerator_devices != compute.accelerator_devices:
            found.append(
                Problem(
                    subject,
                    f"{field}.compute.accelerator_devices",
                    f"({reservation.accelerator_devices}) must equal compute.accelerator_devices ({compute.accelerator_devices}): "
                    "one model, with one tensor-parallel size, serves every pool",
                )
            )
            continue
        count, reason = copies_per_instance(name, reservation)
        if count < 1:
            which = f"{field}.compute" if pool.compute is not None else "compute"
            found.append(Problem(subject, which, f"one copy does not fit on a {name} ({field}: {reason})"))
    if len(storage) == 2:
        found.append(
            Problem(
                subject,
                "instances.pools",
                f"mixes a type with local NVMe storage ({storage[True]}) and one without ({storage[False]}): SageMaker "
                "refuses a volume KMS key on the first and the second needs one; use pools of one kind",
            )
        )
    return found


def provision_timeout_problems(timeout: object, subject: str) -> list[Problem]:
    return whole_seconds_problems(
        subject, "instances.provisioning_timeout", timeout, PROVISION_TIMEOUT_RANGE_SECONDS, "Duration.minutes(15)"
    )


__all__ = [
    "POOL_COUNT_RANGE",
    "PROVISION_TIMEOUT_RANGE_SECONDS",
    "InstancePool",
    "instance_pool_problems",
    "pool_reservations",
    "provision_timeout_problems",
]
