"""`Instances`: the endpoint's instances, as one option object of `MultiAdapterEndpoint`.

Type (or pools of types), counts, volumes and launch options describe one thing, the variant's
instances, so they travel together (as aws-ecs groups an auto scaling group's settings in
``AddCapacityOptions``). The endpoint's hosting checks them with the compute they must hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_kms as kms

from cdk_adapters.contract.serving_image import INFERENCE_AMI_VERSION
from cdk_adapters.hosting.capacity_reservation import CapacityReservation
from cdk_adapters.hosting.instance_access import SsmAccess
from cdk_adapters.hosting.instance_pools import InstancePool


@dataclass(frozen=True)
class Instances:
    """What the endpoint runs on. Every field has a default: ``Instances()`` is one ml.g6.2xlarge."""

    instance_type: str | None = None
    """The variant's one instance type. Default ``ml.g6.2xlarge`` (one L4 GPU, 24 GB), unless
    `pools` is given (then not allowed)."""
    pools: Sequence[InstancePool] | None = None
    """2 to 5 `InstancePool`, in priority order: SageMaker launches the first type while it has
    capacity and falls back to the next (``InstancePools``). The base component then gets one
    specification per type, each with the pool's reservation (default: the endpoint's `compute`); a
    type that cannot hold one copy is refused, and every capacity check takes the pool that holds
    fewest copies. Default None: one type, `instance_type`."""
    provisioning_timeout: Duration | None = None
    """How long SageMaker retries for capacity before the next pool, or failing
    (``VariantInstanceProvisionTimeoutInSeconds``: capacity only, not model download or container
    start); whole seconds from 300 to 3600. Default None: SageMaker's."""
    initial_count: int = 1
    """Instances at creation. Default 1."""
    min_count: int | None = None
    """Managed instance scaling floor. Default: `initial_count`. 0 lets an idle endpoint release its
    last instance, with ``base_component.auto_scale_copy_count(min_copies=0, ...).scale_to_zero()``."""
    max_count: int | None = None
    """Managed instance scaling ceiling. Default: `initial_count`. Autoscaling's ``max_copies`` must
    fit on this many instances (checked at synth)."""
    volume_key: kms.IKey | None = None
    """KMS key for the instances' EBS volume. Default: a key with rotation is created, unless the
    instance type has local NVMe storage, for which SageMaker refuses a key (the hardware encrypts it)."""
    volume_size_in_gb: int | None = None
    """EBS volume size, 1 to 512. Default: SageMaker's. Not allowed on instance types with local storage."""
    ami_version: str = INFERENCE_AMI_VERSION
    """The inference AMI. Default: the one matching the pinned image's CUDA (driver 580)."""
    data_cache: bool | None = None
    """Each instance caches the base model and image, so copies added by autoscaling start faster
    (at the cost of instance storage). Default None: SageMaker's choice (it caches on its own on
    instance types with large local NVMe storage)."""
    ssm_access: SsmAccess | None = None
    """`SsmAccess(reason)` turns on SSM sessions into the instances (``EnableSSMAccess``). Default
    None: off, as in SageMaker."""
    capacity_reservation: CapacityReservation | None = None
    """`CapacityReservation(arn)` launches instances only into that ML capacity reservation (no
    fallback: past its free instances, launches fail). Default None: on-demand capacity."""
