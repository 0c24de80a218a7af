"""What hosts the base model: the SageMaker model, an endpoint config able to host inference
components, and the endpoint, from values the endpoint passes in.

`EndpointHosting` creates its resources in the scope it is given (the endpoint's) rather than in a
construct of its own: a new level in the construct path would rename every logical ID and make
CloudFormation replace the live endpoint. It checks its own values (instance types and pools,
counts, volumes, the variant's options) before the endpoint creates anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration, IResolvable
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from cdk_adapters.hosting.base_copies import BaseCopies
from cdk_adapters.hosting.capacity_reservation import CapacityReservation
from cdk_adapters.hosting.compute import ComputeRequirements, InstanceScaling, copies_fit_problems
from cdk_adapters.hosting.copy_placement import CopyPlacement, data_cache_problems
from cdk_adapters.hosting.data_capture import DataCapture
from cdk_adapters.hosting.instance_access import SsmAccess
from cdk_adapters.hosting.instance_pools import (
    InstancePool,
    instance_pool_problems,
    pool_reservations,
    provision_timeout_problems,
)
from cdk_adapters.hosting.instance_storage import has_local_instance_storage
from cdk_adapters.hosting.instance_types import DEFAULT_INSTANCE_TYPE
from cdk_adapters.hosting.instance_types import instance_type as instance_type_row
from cdk_adapters.hosting.instances import Instances
from cdk_adapters.hosting.networking import Networking, VpcPlacement
from cdk_adapters.hosting.routing import Routing
from cdk_adapters.hosting.sagemaker_metrics import Observability
from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.private.nag_acknowledgments import acknowledge_local_storage_kms
from cdk_adapters.problems import Problem, wrong_kind

VARIANT_NAME = "AllTraffic"
"""The endpoint's one production variant."""


@dataclass(frozen=True)
class HostedModel:
    """What the model's container runs: the image, its environment and the base model's weights."""

    image_uri: str
    environment: IResolvable | dict[str, str]
    model_data_source: sagemaker.CfnModel.ModelDataSourceProperty


class EndpointHosting:
    """The instances and variant of one endpoint, checked (`problems`), then created (`create`)."""

    def __init__(
        self,
        *,
        compute: ComputeRequirements,
        vllm: VllmOptions,
        instances: Instances,
        base_copies: BaseCopies,
        networking: Networking,
        observability: Observability | None,
        routing: Routing | None,
        data_capture: DataCapture | None,
    ) -> None:
        self.compute = compute
        self.vllm = vllm
        self.instances = instances
        self.base_copies = base_copies
        self.startup = base_copies.startup
        self.given_instance_type = instances.instance_type
        pools = instances.pools
        self.instance_pools: tuple[InstancePool, ...] | None = None if pools is None else _as_tuple(pools)
        """The pools in priority order, or None for one instance type."""
        self.instance_provisioning_timeout = instances.provisioning_timeout
        self.instance_type = _first_type(self.instance_pools) or instances.instance_type or DEFAULT_INSTANCE_TYPE
        """The variant's instance type; with pools, the first (highest-priority) pool's."""
        initial = instances.initial_count
        self.initial_instance_count = initial
        self.min_instance_count = initial if instances.min_count is None else instances.min_count
        self.max_instance_count = initial if instances.max_count is None else instances.max_count
        self.copy_count = base_copies.count
        self.given_volume_key = instances.volume_key
        self.volume_size_in_gb = instances.volume_size_in_gb
        self.inference_ami_version = instances.ami_version
        self.network_isolation = networking.network_isolation
        self.observability = observability or Observability()
        self.routing = routing or Routing()
        self.copy_placement = base_copies.placement
        self.data_cache = instances.data_cache
        self.ssm_access = instances.ssm_access
        self.data_capture = data_capture
        self.capacity_reservation = instances.capacity_reservation

    @property
    def local_storage(self) -> bool:
        """The instances have local NVMe storage (pools are all one kind, checked), which takes no KMS key."""
        return has_local_instance_storage(self.instance_type)

    @property
    def instance_scaling(self) -> InstanceScaling:
        """The instances managed scaling may run and what one copy reserves on each type."""
        if self.instance_pools is not None:
            reservations = pool_reservations(self.instance_pools, self.compute)
        else:
            reservations = ((self.instance_type, self.compute),)
        return InstanceScaling(reservations, self.min_instance_count, self.max_instance_count)

    # ------------------------------------------------------------------ checks

    def instance_type_problems(self, subject: str) -> list[Problem]:
        """One instance type, or 2 to 5 pools of them, and the capacity-provisioning timeout."""
        found: list[Problem] = []
        if self.instance_pools is not None:
            if self.given_instance_type is not None:
                found.append(Problem(subject, "instances.instance_type", "is set with pools; give the types as pools only"))
            if self.capacity_reservation is not None:
                found.append(
                    Problem(
                        subject,
                        "instances.capacity_reservation",
                        "is set with pools: an ML capacity reservation holds one instance type and allows no "
                        "fallback, so the other pools could never launch; use one instance_type with it",
                    )
                )
            found += instance_pool_problems(self.instance_pools, self.compute, subject)
        elif not isinstance(self.instance_type, str) or not self.instance_type.startswith("ml."):
            found.append(
                Problem(
                    subject,
                    "instances.instance_type",
                    f"must be a SageMaker instance type like 'ml.g6.2xlarge', got {self.instance_type!r}",
                )
            )
        if self.instance_provisioning_timeout is not None:
            found += provision_timeout_problems(self.instance_provisioning_timeout, subject)
        return found

    def count_and_volume_problems(self, subject: str) -> list[Problem]:
        """Instance and copy counts, the volume's key and size, and the GPUs a copy gets."""
        found: list[Problem] = []

        def bad(field: str, message: str) -> None:
            found.append(Problem(subject, field, message))

        initial = self.initial_instance_count
        for field, value, low in (
            ("instances.initial_count", initial, 1),
            ("instances.min_count", self.min_instance_count, 0),
            ("instances.max_count", self.max_instance_count, 1),
            ("base_copies.count", self.copy_count, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                bad(field, f"must be an integer >= {low}, got {value!r}")
        counts = (self.min_instance_count, initial, self.max_instance_count)
        if all(isinstance(c, int) for c in counts) and not counts[0] <= counts[1] <= counts[2]:
            bad(
                "instances.initial_count",
                f"must lie within min_count..max_count ({counts[0]}..{counts[2]}), got {counts[1]}",
            )
        if isinstance(self.instance_type, str) and self.local_storage:
            if self.given_volume_key is not None:
                bad(
                    "instances.volume_key",
                    f"{self.instance_type} has local NVMe storage, which the hardware encrypts; SageMaker refuses a KMS key for it",
                )
            if self.volume_size_in_gb is not None:
                bad(
                    "instances.volume_size_in_gb",
                    f"{self.instance_type} has local NVMe storage; SageMaker refuses a volume size for it",
                )
        size = self.volume_size_in_gb
        if size is not None and (not isinstance(size, int) or not 1 <= size <= 512):
            bad("instances.volume_size_in_gb", f"must be an integer from 1 to 512, got {size!r}")
        tensor_parallel = self.vllm.tensor_parallel_size
        if tensor_parallel is not None and tensor_parallel != self.compute.accelerator_devices:
            bad(
                "vllm.tensor_parallel_size",
                f"({tensor_parallel}) must equal compute.accelerator_devices ({self.compute.accelerator_devices}): "
                "each copy gets exactly that many GPUs",
            )
        found += self._initial_copies_problems(subject)
        return found

    def option_problems(self, subject: str, extra: Sequence[tuple[str, type[Any], Any]] = ()) -> list[Problem]:
        """Observability, routing, copy placement, SSM access, data capture, the capacity reservation
        (and `extra` settings of the same shape), each with its own checks; then the data cache."""
        found: list[Problem] = []
        options: tuple[tuple[str, type[Any], Any], ...] = (
            ("observability", Observability, self.observability),
            ("routing", Routing, self.routing),
            ("base_copies.placement", CopyPlacement, self.copy_placement),
            ("instances.ssm_access", SsmAccess, self.ssm_access),
            ("data_capture", DataCapture, self.data_capture),
            ("instances.capacity_reservation", CapacityReservation, self.capacity_reservation),
            *extra,
        )
        for prop, kind, value in options:
            wrong = wrong_kind(subject, prop, value, kind)
            found += wrong if wrong or value is None else value.problems(subject)
        found += data_cache_problems(self.data_cache, subject)
        return found

    def _initial_copies_problems(self, subject: str) -> list[Problem]:
        """The copies a deploy starts with must fit on the instances it starts with, of the pool that
        holds fewest (known instance types only: the table in `instance_types` says what one
        instance holds; a pool that cannot hold one copy is refused by the pools' own check)."""
        copy_count, initial = self.copy_count, self.initial_instance_count
        counts_valid = all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in (copy_count, initial))
        if not counts_valid or self.compute.problems(subject):
            return []
        if self.instance_pools is not None and instance_pool_problems(self.instance_pools, self.compute, subject):
            return []
        scaling = self.instance_scaling
        if any(instance_type_row(name) is None for name in scaling.instance_types):
            return []
        return copies_fit_problems(
            subject,
            scaling,
            copies=copy_count,
            copies_field="base_copies.count",
            instance_count=initial,
            count_field="instances.initial_count",
        )

    # ------------------------------------------------------------------ resources

    def create(
        self,
        scope: Construct,
        *,
        endpoint_name: str,
        role: iam.IRole,
        model: HostedModel,
        vpc_placement: VpcPlacement | None,
        volume_key: kms.IKey | None,
        emf: bool,
    ) -> tuple[sagemaker.CfnModel, sagemaker.CfnEndpointConfig, sagemaker.CfnEndpoint]:
        """The model, an endpoint config that can host inference components, and the endpoint, in `scope`."""
        vpc_config: dict[str, Any] = (
            {"security_group_ids": vpc_placement.security_group_ids, "subnets": vpc_placement.subnet_ids} if vpc_placement else {}
        )
        cfn_model = self.create_model(scope, "Model", role=role, model=model, vpc_placement=vpc_placement)
        config = sagemaker.CfnEndpointConfig(
            scope,
            "EndpointConfig",
            execution_role_arn=role.role_arn,
            production_variants=[self._variant()],
            metrics_config=self.observability.render_endpoint_config(emf),
            data_capture_config=self.data_capture.render() if self.data_capture is not None else None,
            kms_key_id=volume_key.key_arn if volume_key else None,
            enable_network_isolation=self.network_isolation,
            vpc_config=sagemaker.CfnEndpointConfig.VpcConfigProperty(**vpc_config) if vpc_config else None,
        )
        if self.local_storage:
            acknowledge_local_storage_kms(config)
        endpoint = sagemaker.CfnEndpoint(
            scope, "Endpoint", endpoint_name=endpoint_name, endpoint_config_name=config.attr_endpoint_config_name
        )
        return cfn_model, config, endpoint

    def create_model(
        self, scope: Construct, id: str, *, role: iam.IRole, model: HostedModel, vpc_placement: VpcPlacement | None
    ) -> sagemaker.CfnModel:
        """One SageMaker model of the base weights in `scope`: the endpoint's, or a rank tier's with its own environment."""
        return sagemaker.CfnModel(
            scope,
            id,
            execution_role_arn=role.role_arn,
            enable_network_isolation=self.network_isolation,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=model.image_uri, environment=model.environment, model_data_source=model.model_data_source
            ),
            vpc_config=sagemaker.CfnModel.VpcConfigProperty(
                security_group_ids=vpc_placement.security_group_ids, subnets=vpc_placement.subnet_ids
            )
            if vpc_placement
            else None,
        )

    def _variant(self) -> sagemaker.CfnEndpointConfig.ProductionVariantProperty:
        download, health = self.startup.seconds()
        return sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=VARIANT_NAME,
            instance_type=self.instance_type if self.instance_pools is None else None,
            instance_pools=_render_pools(self.instance_pools),
            variant_instance_provision_timeout_in_seconds=_seconds(self.instance_provisioning_timeout),
            initial_instance_count=self.initial_instance_count,
            managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                status="ENABLED", min_instance_count=self.min_instance_count, max_instance_count=self.max_instance_count
            ),
            routing_config=self.routing.render(),
            inference_ami_version=self.inference_ami_version,
            model_data_download_timeout_in_seconds=download,
            container_startup_health_check_timeout_in_seconds=health,
            volume_size_in_gb=self.volume_size_in_gb,
            enable_ssm_access=True if self.ssm_access is not None else None,
            capacity_reservation_config=self.capacity_reservation.render() if self.capacity_reservation is not None else None,
        )


def _as_tuple(pools: object) -> Any:
    """The pools as given (a list becomes a tuple); anything else is kept for the check to name."""
    return tuple(pools) if isinstance(pools, (list, tuple)) else pools


def _first_type(pools: object) -> str | None:
    if isinstance(pools, tuple) and pools and isinstance(pools[0], InstancePool) and isinstance(pools[0].instance_type, str):
        return pools[0].instance_type
    return None


def _render_pools(pools: tuple[InstancePool, ...] | None) -> list[sagemaker.CfnEndpointConfig.InstancePoolProperty] | None:
    """``InstancePools``: priority 1 is the first pool."""
    if pools is None:
        return None
    return [
        sagemaker.CfnEndpointConfig.InstancePoolProperty(instance_type=pool.instance_type, priority=index)
        for index, pool in enumerate(pools, start=1)
    ]


def _seconds(duration: Duration | None) -> int | None:
    return None if duration is None else int(duration.to_seconds())
