"""`MultiAdapterEndpoint`: one SageMaker endpoint serving many LoRA adapters of one base model.

It creates the execution role, the base model, an endpoint config able to host inference
components, the endpoint, the base inference component, and (through `add_adapter`) one adapter
inference component per adapter, plus a discovery record (outputs and an SSM parameter) so
clients elsewhere can find which component serves which adapter.
"""

from __future__ import annotations

import json
from os import PathLike
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from aws_cdk import Annotations, CfnOutput, Stack, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from cdk_adapters import names, serving_env
from cdk_adapters.adapter_artifact import AdapterArtifact
from cdk_adapters.container_image import ContainerImage
from cdk_adapters.execution_role import ROLE_INLINE_POLICY_LIMIT, ExecutionRolePermissions, inline_policy_characters
from cdk_adapters.inference_component import (
    AdapterInferenceComponent,
    BaseInferenceComponent,
    ComputeRequirements,
    StartupTimeouts,
)
from cdk_adapters.instance_storage import has_local_instance_storage
from cdk_adapters.model_data import ModelData
from cdk_adapters.nag_acknowledgments import acknowledge_local_storage_kms
from cdk_adapters.problems import ConfigurationError, Problem, raise_if_any
from cdk_adapters.serving_image import INFERENCE_AMI_VERSION
from cdk_adapters.vllm_options import VllmOptions

if TYPE_CHECKING:
    from cdk_adapters.manifest import ManifestPlan

VARIANT_NAME = "AllTraffic"
DEFAULT_INSTANCE_TYPE = "ml.g6.2xlarge"
ENVIRONMENT_VALUE_MAX_LENGTH = 1024
SSM_STANDARD_MAX_LENGTH = 4096
SSM_ADVANCED_MAX_LENGTH = 8192
INVOKE_ACTIONS = ("sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream")
ROLE_POLICY_WARNING_SHARE = 0.9
"""Warn once the role's inline policies are estimated at this share of IAM's limit."""


class MultiAdapterEndpoint(Construct):
    """A SageMaker endpoint with a base inference component and one component per LoRA adapter.

    Names: the endpoint and every inference component get deterministic names derived from the
    stack name and this construct's path (see `cdk_adapters.names`); the model and endpoint config
    keep CloudFormation-generated names, so replacing them never collides.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        model_data: ModelData,
        compute: ComputeRequirements | None = None,
        image: ContainerImage | None = None,
        vllm: VllmOptions | None = None,
        instance_type: str = DEFAULT_INSTANCE_TYPE,
        initial_instance_count: int = 1,
        min_instance_count: int | None = None,
        max_instance_count: int | None = None,
        copy_count: int = 1,
        startup: StartupTimeouts | None = None,
        allow_base_model: bool = False,
        allow_vision_modules: bool = False,
        base_model_id: str | None = None,
        base_model_revision: str | None = None,
        environment: Mapping[str, str] | None = None,
        role: iam.IRole | None = None,
        volume_key: kms.IKey | None = None,
        volume_size_in_gb: int | None = None,
        inference_ami_version: str = INFERENCE_AMI_VERSION,
        network_isolation: bool = True,
        vpc: ec2.IVpc | None = None,
        vpc_subnets: ec2.SubnetSelection | None = None,
        security_groups: Sequence[ec2.ISecurityGroup] | None = None,
        discovery_parameter_name: str | None = None,
    ) -> None:
        """
        :param model_data: the base model's weights in S3 (`ModelData.from_s3_prefix` / `from_s3_archive`).
        :param compute: what one base-model copy reserves; `min_memory_required_in_mb` is required.
        :param image: serving image. Default: `ContainerImage.from_asset()`, this repository's
            `container/` (the only image that speaks the adapter contract this library relies on).
        :param vllm: vLLM engine options. Default `VllmOptions()` (4 GPU-resident adapters, rank <= 16).
        :param instance_type: default ``ml.g6.2xlarge`` (one L4 GPU, 24 GB).
        :param initial_instance_count: instances at creation. Default 1.
        :param min_instance_count: managed instance scaling floor. Default: `initial_instance_count`.
        :param max_instance_count: managed instance scaling ceiling. Default: `initial_instance_count`.
        :param copy_count: initial copies of the base component. Default 1.
        :param startup: download and health-check timeouts. Default 20 minutes each.
        :param allow_base_model: let requests without an adapter reach the base model. Default
            False: the container answers 400, so a dropped adapter header never silently returns
            un-fine-tuned output.
        :param allow_vision_modules: admit adapters that target a vision-language model's vision
            tower or connector when SageMaker registers them. Default False: vLLM serves LoRA on
            the language model only unless told otherwise.
        :param base_model_id: the base model's identity (e.g. a Hugging Face repo id) that adapters
            must name in ``base_model_name_or_path``; checked when SageMaker registers an adapter.
        :param base_model_revision: the base model's pinned revision. Default: not checked.
        :param environment: further container variables. Default none. May not override ours.
        :param role: execution role. Default: a least-privilege role created here.
        :param volume_key: KMS key for the instances' EBS volume. Default: a key with rotation is
            created, unless `instance_type` has local NVMe storage, for which SageMaker refuses a
            key (the hardware encrypts it).
        :param volume_size_in_gb: EBS volume size. Default: SageMaker's. Not allowed on instance types
            with local storage.
        :param inference_ami_version: default matches the pinned image's CUDA (driver 580).
        :param network_isolation: no network inside the container. Default True.
        :param vpc: run the instances in this VPC. Default: none.
        :param vpc_subnets: which subnets of `vpc`. Default: private subnets.
        :param security_groups: default: one created with no ingress, when `vpc` is given.
        :param discovery_parameter_name: SSM parameter holding the adapter map as JSON.
            Default ``/cdk-adapters/<endpoint name>/inference-components``.
        """
        super().__init__(scope, id)
        self.compute = compute or ComputeRequirements()
        self.vllm = vllm or VllmOptions()
        self.startup = startup or StartupTimeouts()
        self.image = image or ContainerImage.from_asset()
        self.instance_type = instance_type
        self.min_instance_count = initial_instance_count if min_instance_count is None else min_instance_count
        self.max_instance_count = initial_instance_count if max_instance_count is None else max_instance_count
        self._adapters: dict[str, AdapterInferenceComponent] = {}

        stack = Stack.of(self)
        problems: list[Problem] = []
        if Token.is_unresolved(stack.stack_name):
            problems.append(Problem(self._subject, "stack_name", "the stack name must be known at synth to derive component names"))
            prefix = "unresolved"
        else:
            prefix = names.component_prefix(stack.stack_name, self.node.path)
        self.prefix = prefix
        self.endpoint_name = prefix
        self.base_component_name = names.base_component_name(prefix)
        self.discovery_parameter_name = discovery_parameter_name or f"/cdk-adapters/{prefix}/inference-components"

        container_environment = self._container_environment(
            allow_base_model, allow_vision_modules, base_model_id, base_model_revision, environment or {}, problems
        )
        problems += self._check_props(
            initial_instance_count, copy_count, volume_key, volume_size_in_gb, vpc, vpc_subnets, security_groups
        )
        problems += self.compute.problems(self._subject)
        problems += self.startup.problems(self._subject)
        problems += self.vllm.problems(self._subject)
        problems += self.image.problems(self._subject)
        problems += model_data.problems(self._subject)
        tensor_parallel = self.vllm.tensor_parallel_size
        if tensor_parallel is not None and tensor_parallel != self.compute.accelerator_devices:
            problems.append(
                Problem(
                    self._subject,
                    "vllm.tensor_parallel_size",
                    f"({tensor_parallel}) must equal compute.accelerator_devices ({self.compute.accelerator_devices}): "
                    "each copy gets exactly that many GPUs",
                )
            )
        raise_if_any(problems, heading=f"MultiAdapterEndpoint {self.node.path!r} is misconfigured")

        # Everything below only creates constructs; all checks passed above.
        self.role: iam.IRole = role or iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker execution role of multi-adapter endpoint {prefix}",
        )
        image_config = self.image.bind(self)
        model_data_config = model_data.bind()
        local_storage = has_local_instance_storage(instance_type)
        self.volume_key: kms.IKey | None = None
        if not local_storage:
            self.volume_key = volume_key or kms.Key(
                self,
                "VolumeKey",
                enable_key_rotation=True,
                description=f"Encrypts the instance volumes of SageMaker endpoint {prefix}",
            )

        permissions = ExecutionRolePermissions(
            self,
            "ExecutionRolePolicy",
            role=self.role,
            repository_arn=image_config.repository_arn,
            endpoint_name=self.endpoint_name,
            base_component_name=self.base_component_name,
            model_data_statements=model_data_config.statements,
            volume_key=self.volume_key,
            vpc_access=vpc is not None,
        )
        self._role_policy_characters = inline_policy_characters([permissions.policy])
        self._warned_about_policy_size = False

        self.security_groups: list[ec2.ISecurityGroup] = []
        vpc_config = None
        if vpc is not None:
            self.security_groups = list(security_groups or [])
            if not self.security_groups:
                self.security_groups.append(
                    ec2.SecurityGroup(
                        self,
                        "SecurityGroup",
                        vpc=vpc,
                        description=f"SageMaker endpoint {prefix}: no ingress; egress for S3 and ECR",
                        allow_all_outbound=True,
                    )
                )
            subnets = vpc.select_subnets(**_subnet_kwargs(vpc_subnets))
            vpc_config = (
                [group.security_group_id for group in self.security_groups],
                subnets.subnet_ids,
            )

        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            enable_network_isolation=network_isolation,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image_config.image_uri,
                environment=container_environment,
                model_data_source=model_data_config.model_data_source,
            ),
            vpc_config=sagemaker.CfnModel.VpcConfigProperty(security_group_ids=vpc_config[0], subnets=vpc_config[1])
            if vpc_config
            else None,
        )
        self.model.node.add_dependency(permissions)

        download, health = self.startup.seconds()
        variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=VARIANT_NAME,
            instance_type=instance_type,
            initial_instance_count=initial_instance_count,
            managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                status="ENABLED",
                min_instance_count=self.min_instance_count,
                max_instance_count=self.max_instance_count,
            ),
            routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(routing_strategy="LEAST_OUTSTANDING_REQUESTS"),
            inference_ami_version=inference_ami_version,
            model_data_download_timeout_in_seconds=download,
            container_startup_health_check_timeout_in_seconds=health,
            volume_size_in_gb=volume_size_in_gb,
        )
        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            execution_role_arn=self.role.role_arn,
            production_variants=[variant],
            kms_key_id=self.volume_key.key_arn if self.volume_key else None,
            enable_network_isolation=network_isolation,
            vpc_config=sagemaker.CfnEndpointConfig.VpcConfigProperty(security_group_ids=vpc_config[0], subnets=vpc_config[1])
            if vpc_config
            else None,
        )
        self.endpoint_config.node.add_dependency(permissions)
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=self.endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
        )
        self.endpoint_arn = stack.format_arn(service="sagemaker", resource="endpoint", resource_name=self.endpoint_name)

        self.base_component = BaseInferenceComponent(
            self,
            "BaseComponent",
            inference_component_name=self.base_component_name,
            endpoint_name=self.endpoint.attr_endpoint_name,
            variant_name=VARIANT_NAME,
            model_name=self.model.attr_model_name,
            compute=self.compute,
            startup=self.startup,
            copy_count=copy_count,
        )
        self.base_component.node.add_dependency(permissions)
        self._adapter_scope = Construct(self, "Adapters")
        self._publish_discovery()
        if local_storage:
            acknowledge_local_storage_kms(self.endpoint_config)

    @classmethod
    def from_manifest(
        cls,
        scope: Construct,
        id: str,
        *,
        manifest: "str | PathLike[str] | ManifestPlan",
        vllm: VllmOptions | None = None,
        **props: Any,
    ) -> "MultiAdapterEndpoint":
        """An endpoint serving an adapter manifest: its base model, serving limits and every row.

        The compatibility gate runs first, on every row (`plan_manifest_file`): when anything is
        wrong, one `ConfigurationError` lists every problem and nothing is added to `scope`.

        :param manifest: the manifest's path, or a `ManifestPlan` that already passed the gate.
        :param vllm: engine options; the manifest's `max_loras`, `max_cpu_loras` and
            `max_lora_rank` replace those fields. Default `VllmOptions()`.
        :param props: every other `MultiAdapterEndpoint` option (instance type, compute, image, ...).
        """
        from cdk_adapters.manifest import ManifestPlan, add_manifest_adapters, endpoint_props, plan_manifest_file

        plan = manifest if isinstance(manifest, ManifestPlan) else plan_manifest_file(manifest)
        endpoint = cls(scope, id, **endpoint_props(scope, plan, vllm=vllm, weights_id=f"{id}BaseModelWeights"), **props)
        add_manifest_adapters(endpoint, plan)
        return endpoint

    # ------------------------------------------------------------------ adapters

    def add_adapter(self, name: str, *, artifact: AdapterArtifact) -> AdapterInferenceComponent:
        """Serve one LoRA adapter as its own inference component, named ``<prefix>-<name>``.

        The construct ID derives from `name` alone, so adding or removing another adapter never
        changes this one's logical ID.
        """
        subject = f"adapter {name!r} of MultiAdapterEndpoint {self.node.path!r}"
        problems = names.validate_adapter_name(name, subject)
        if isinstance(name, str) and name.lower() in self._adapters:
            problems.append(Problem(subject, "name", f"is already added (adapter names are case-insensitive, as SageMaker's are)"))
        problems += artifact.problems(subject)
        if not problems:
            grown = len(self._discovery_record()) + len(json.dumps({name: names.adapter_component_name(self.prefix, name)}))
            if grown > SSM_ADVANCED_MAX_LENGTH:
                problems.append(
                    Problem(subject, "name", f"the adapter map would be {grown} characters; its SSM parameter holds "
                            f"{SSM_ADVANCED_MAX_LENGTH}. Serve further adapters from another endpoint")
                )
        raise_if_any(problems, heading=f"cannot add adapter {name!r}")
        component = AdapterInferenceComponent(
            self._adapter_scope,
            name,
            adapter_name=name,
            inference_component_name=names.adapter_component_name(self.prefix, name),
            endpoint_name=self.endpoint.attr_endpoint_name,
            base=self.base_component,
            artifact=artifact,
            role=self.role,
        )
        self._adapters[name.lower()] = component
        self._refresh_discovery()
        self._role_policy_characters += inline_policy_characters([component.read_policy])
        self._warn_if_role_policies_near_limit()
        return component

    def _warn_if_role_policies_near_limit(self) -> None:
        """Each adapter adds a small inline policy; IAM caps one role's inline policies in total.

        Deploys past the cap fail with a LimitExceeded error, so say so at synth, once.
        """
        used = self._role_policy_characters
        if self._warned_about_policy_size or used < ROLE_POLICY_WARNING_SHARE * ROLE_INLINE_POLICY_LIMIT:
            return
        self._warned_about_policy_size = True
        Annotations.of(self).add_warning_v2(
            "cdk-adapters:role-inline-policy-size",
            f"the execution role's inline policies are estimated at {used} of IAM's {ROLE_INLINE_POLICY_LIMIT} "
            f"characters with {len(self._adapters)} adapters; a deploy past the limit fails. Serve further "
            "adapters from another MultiAdapterEndpoint, or use shorter artifact URLs.",
        )

    @property
    def adapters(self) -> dict[str, AdapterInferenceComponent]:
        """Adapter name -> its component, in the order added."""
        return {component.adapter_name: component for component in self._adapters.values()}

    def adapter_component_names(self) -> dict[str, str]:
        """Adapter name -> inference component name: what a client passes as ``InferenceComponentName``."""
        return {component.adapter_name: component.inference_component_name for component in self._adapters.values()}

    # ------------------------------------------------------------------ grants and metrics

    def grant_invoke(self, grantee: iam.IGrantable, adapters: Sequence[str] | None = None) -> iam.Grant:
        """Let `grantee` invoke this endpoint's adapters.

        `adapters` names the adapters (already added); default all of this endpoint's components,
        present and future, through the ``<prefix>-*`` name pattern, so adding an adapter later never
        rewrites the grantee's policy. IAM authorizes both actions against the endpoint and the
        ``inference-component`` resource types (Service Authorization Reference), so the component
        ARNs really limit which adapters the grantee can call.
        """
        stack = Stack.of(self)
        if adapters is None:
            component_arns = [stack.format_arn(service="sagemaker", resource="inference-component", resource_name=f"{self.prefix}-*")]
        else:
            unknown = [a for a in adapters if not isinstance(a, str) or a.lower() not in self._adapters]
            if unknown:
                raise ConfigurationError([self._unknown_adapter("grant_invoke.adapters", a) for a in unknown])
            component_arns = [
                stack.format_arn(service="sagemaker", resource="inference-component", resource_name=self._adapters[a.lower()].inference_component_name)
                for a in adapters
            ]
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(INVOKE_ACTIONS),
            resource_arns=[self.endpoint_arn, *component_arns],
        )

    def grant_read_discovery(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` read the discovery parameter (the adapter map), by its literal ARN, so a
        client in another stack needs no cross-stack export."""
        arn = Stack.of(self).format_arn(
            service="ssm", resource="parameter", resource_name=self.discovery_parameter_name.lstrip("/")
        )
        return iam.Grant.add_to_principal(grantee=grantee, actions=["ssm:GetParameter"], resource_arns=[arn])

    def metric(self, metric_name: str, *, adapter: str | None = None, **props: Any) -> cloudwatch.Metric:
        """An ``AWS/SageMaker`` metric of one adapter's component, or of the base component.

        The components' own ``metric_*`` methods (``endpoint.adapters[name].metric_invocations()``,
        ``endpoint.base_component.metric_invocations_per_copy()``) name the metrics SageMaker publishes.
        """
        return self._component(adapter).metric(metric_name, **props)

    def _component(self, adapter: str | None) -> BaseInferenceComponent | AdapterInferenceComponent:
        if adapter is None:
            return self.base_component
        component = self._adapters.get(adapter.lower()) if isinstance(adapter, str) else None
        if component is None:
            raise ConfigurationError([self._unknown_adapter("adapter", adapter)])
        return component

    def _unknown_adapter(self, field: str, adapter: object) -> Problem:
        return Problem(self._subject, field, f"{adapter!r} is not an adapter of this endpoint; add it first")

    # ------------------------------------------------------------------ internals

    @property
    def _subject(self) -> str:
        return f"MultiAdapterEndpoint {self.node.path!r}"

    def _container_environment(
        self,
        allow_base_model: bool,
        allow_vision_modules: bool,
        base_model_id: str | None,
        base_model_revision: str | None,
        extra: Mapping[str, str],
        problems: list[Problem],
    ) -> dict[str, str]:
        env = self.vllm.environment()
        env[serving_env.ALLOW_BASE_MODEL] = "true" if allow_base_model else "false"
        env[serving_env.ALLOW_VISION_MODULES] = "true" if allow_vision_modules else "false"
        if base_model_id is not None:
            env[serving_env.BASE_MODEL_ID] = base_model_id
        if base_model_revision is not None:
            if base_model_id is None:
                problems.append(Problem(self._subject, "base_model_revision", "needs base_model_id as well"))
            env[serving_env.BASE_MODEL_REVISION] = base_model_revision
        for key, value in extra.items():
            if key in env or key.startswith(serving_env.VLLM_FLAG_PREFIX) or key.startswith("CDK_ADAPTERS_"):
                problems.append(Problem(self._subject, f"environment.{key}", "is managed by the construct; use the typed option instead"))
            elif not isinstance(value, str):
                problems.append(Problem(self._subject, f"environment.{key}", f"must be a string, got {value!r}"))
            else:
                env[key] = value
        for key, value in env.items():
            if len(value) > ENVIRONMENT_VALUE_MAX_LENGTH:
                problems.append(
                    Problem(self._subject, f"environment.{key}", f"is {len(value)} characters; SageMaker allows {ENVIRONMENT_VALUE_MAX_LENGTH}")
                )
        return env

    def _check_props(
        self,
        initial_instance_count: int,
        copy_count: int,
        volume_key: kms.IKey | None,
        volume_size_in_gb: int | None,
        vpc: ec2.IVpc | None,
        vpc_subnets: ec2.SubnetSelection | None,
        security_groups: Sequence[ec2.ISecurityGroup] | None,
    ) -> list[Problem]:
        found: list[Problem] = []

        def bad(field: str, message: str) -> None:
            found.append(Problem(self._subject, field, message))

        if not isinstance(self.instance_type, str) or not self.instance_type.startswith("ml."):
            bad("instance_type", f"must be a SageMaker instance type like 'ml.g6.2xlarge', got {self.instance_type!r}")
        for field, value, low in (
            ("initial_instance_count", initial_instance_count, 1),
            ("min_instance_count", self.min_instance_count, 0),
            ("max_instance_count", self.max_instance_count, 1),
            ("copy_count", copy_count, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                bad(field, f"must be an integer >= {low}, got {value!r}")
        counts = (self.min_instance_count, initial_instance_count, self.max_instance_count)
        if all(isinstance(c, int) for c in counts) and not counts[0] <= counts[1] <= counts[2]:
            bad("initial_instance_count", f"must lie within min_instance_count..max_instance_count ({counts[0]}..{counts[2]}), got {counts[1]}")
        if isinstance(self.instance_type, str) and has_local_instance_storage(self.instance_type):
            if volume_key is not None:
                bad("volume_key", f"{self.instance_type} has local NVMe storage, which the hardware encrypts; SageMaker refuses a KMS key for it")
            if volume_size_in_gb is not None:
                bad("volume_size_in_gb", f"{self.instance_type} has local NVMe storage; SageMaker refuses a volume size for it")
        if volume_size_in_gb is not None and (not isinstance(volume_size_in_gb, int) or not 1 <= volume_size_in_gb <= 512):
            bad("volume_size_in_gb", f"must be an integer from 1 to 512, got {volume_size_in_gb!r}")
        if vpc is None and (vpc_subnets is not None or security_groups):
            bad("vpc", "vpc_subnets and security_groups need a vpc")
        return found

    def _discovery_record(self) -> str:
        return json.dumps(
            {
                "endpoint_name": self.endpoint_name,
                "base_inference_component_name": self.base_component_name,
                "adapters": self.adapter_component_names(),
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    def _publish_discovery(self) -> None:
        """Outputs and an SSM parameter that say which component serves which adapter.

        Only the adapter map output and the parameter's value change when adapters change.
        """
        CfnOutput(self, "EndpointName", value=self.endpoint.attr_endpoint_name, description="SageMaker endpoint name")
        CfnOutput(self, "BaseInferenceComponentName", value=self.base_component_name, description="Base model inference component")
        self._adapter_map_output = CfnOutput(
            self, "AdapterInferenceComponents", value="{}", description="JSON map: adapter name -> InferenceComponentName"
        )
        self.discovery_parameter = ssm.StringParameter(
            self,
            "DiscoveryParameter",
            parameter_name=self.discovery_parameter_name,
            string_value=self._discovery_record(),
            description=f"Adapter -> inference component map of SageMaker endpoint {self.endpoint_name}",
        )
        self._refresh_discovery()

    def _refresh_discovery(self) -> None:
        adapter_map = json.dumps(self.adapter_component_names(), sort_keys=True, separators=(",", ":"))
        self._adapter_map_output.value = adapter_map
        record = self._discovery_record()
        parameter: ssm.CfnParameter = self.discovery_parameter.node.default_child  # type: ignore[assignment]
        parameter.value = record
        parameter.tier = "Standard" if len(record) <= SSM_STANDARD_MAX_LENGTH else "Advanced"


def _subnet_kwargs(selection: ec2.SubnetSelection | None) -> dict[str, object]:
    if selection is None:
        return {"subnet_type": ec2.SubnetType.PRIVATE_WITH_EGRESS}
    return {
        key: value
        for key, value in {
            "subnet_type": selection.subnet_type,
            "subnets": selection.subnets,
            "subnet_group_name": selection.subnet_group_name,
            "availability_zones": selection.availability_zones,
            "one_per_az": selection.one_per_az,
            "subnet_filters": selection.subnet_filters,
        }.items()
        if value is not None
    }
