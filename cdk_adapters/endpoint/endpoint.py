"""`MultiAdapterEndpoint`: one SageMaker endpoint serving many LoRA adapters of one base model.

It creates the execution role, the base model, an endpoint config able to host inference
components, the endpoint, the base inference component, and (through `add_adapter`) one adapter
inference component per adapter, plus a discovery record clients read to find them.

This module only orchestrates. Each concern has its own home: the role's permissions
(`execution_role`, read access by `adapter_location`), the container environment
(`serving_policy`), networking (`networking`), where adapter components live and how fast they
are created (`fleet`), the discovery record (`discovery`, schema in `contract.discovery`) and
callers' invoke grants (`invoke_grant`). What depends on the whole fleet (the discovery value,
the invoke grants' resources, the policy-size and capacity checks) is rendered or checked once,
at synth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aws_cdk import Lazy, Stack, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.contract import adapter_identity, capture_record
from cdk_adapters.contract.adapter_names import adapter_component_name, adapter_name_key
from cdk_adapters.contract.discovery import CanaryRecord, DiscoveryRecord, alias_problems
from cdk_adapters.contract.tenant_limits import AdapterLimits
from cdk_adapters.deploy_check.deploy_check import AdapterDeployCheck
from cdk_adapters.deploy_check.settings import AdapterCheck, DeployCheck
from cdk_adapters.endpoint import adapter_checks, discovery_parameter, names, prop_groups, serving_reference
from cdk_adapters.endpoint.adapter_settings import AdapterSettings, ServingEnvironment, SettingsSizeValidation
from cdk_adapters.endpoint.base_model_identity import BaseModelIdentity
from cdk_adapters.endpoint.components import AdapterInferenceComponent, BaseInferenceComponent
from cdk_adapters.endpoint.execution_role import ExecutionRolePermissions, sagemaker_principal
from cdk_adapters.endpoint.fleet import AdapterFleet, FleetPlacement
from cdk_adapters.endpoint.invoke_grant import InvokeGrants, granted_list_problems
from cdk_adapters.endpoint.rank_tiers import (
    RankTier,
    ServedTier,
    base_component_options,
    create_tiers,
    fixed_tiers,
    tier_problems,
    tiers_ranks,
)
from cdk_adapters.endpoint.serving_policy import ServingPolicy
from cdk_adapters.endpoint.synth_validations import AdapterNamesValidation, AliasValidation, alias_name_problems
from cdk_adapters.gate import Acknowledgment, BaseModelFacts
from cdk_adapters.gate.ranks import smallest_tier_holding
from cdk_adapters.hosting.base_copies import BaseCopies
from cdk_adapters.hosting.compute import ComputeRequirements
from cdk_adapters.hosting.container_image import ContainerImage, ContainerImageConfig
from cdk_adapters.hosting.data_capture import REASON_CAPTURE_PREFIX, DataCapture
from cdk_adapters.hosting.endpoint_hosting import VARIANT_NAME, EndpointHosting, HostedModel
from cdk_adapters.hosting.instances import Instances
from cdk_adapters.hosting.logs import EndpointLogGroups, EndpointLogs, grant_read_capture, with_logs_key
from cdk_adapters.hosting.model_data import ModelData, ModelDataConfig
from cdk_adapters.hosting.networking import Networking, VpcPlacement
from cdk_adapters.hosting.rolling_update import RollingUpdate
from cdk_adapters.hosting.routing import Routing
from cdk_adapters.hosting.sagemaker_metrics import Observability
from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.monitoring.alarms import MonitoringAlarms
from cdk_adapters.monitoring.dashboard import DEFAULT_TOP_N
from cdk_adapters.monitoring.endpoint_monitoring import EndpointMonitoring
from cdk_adapters.monitoring.metric_source import RequestMetrics
from cdk_adapters.private.arns import endpoint_arn, log_group_arn
from cdk_adapters.problems import ConfigurationError, Problem, raise_if_any

if TYPE_CHECKING:
    from cdk_adapters.endpoint.imported import ImportedMultiAdapterEndpoint


class MultiAdapterEndpoint(Construct):
    """A SageMaker endpoint with a base inference component and one component per LoRA adapter.

    Names: the endpoint and every inference component get deterministic names derived from the
    stack name and this construct's path (see `cdk_adapters.endpoint.names`); the model and endpoint config
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
        adapter_locations: Sequence[AdapterLocation] | None = None,
        placement: FleetPlacement | None = None,
        instances: Instances | None = None,
        base_copies: BaseCopies | None = None,
        allow_base_model: bool = False,
        allow_vision_modules: bool = False,
        base_model: BaseModelIdentity | None = None,
        environment: Mapping[str, str] | None = None,
        role: iam.IRole | None = None,
        networking: Networking | None = None,
        discovery_parameter_name: str | None = None,
        request_metrics: RequestMetrics | None = None,
        alarms: MonitoringAlarms | None = None,
        dashboard: bool = True,
        dashboard_top_n: int = DEFAULT_TOP_N,
        deployment: RollingUpdate | None = None,
        adapter_limits: AdapterLimits | None = None,
        adapter_capture: capture_record.CaptureSettings | None = None,
        fair_share: bool = True,
        logs: EndpointLogs | None = None,
        observability: Observability | None = None,
        routing: Routing | None = None,
        data_capture: DataCapture | None = None,
        deploy_check: DeployCheck | None = None,
        rank_tiers: Sequence[RankTier] | None = None,
        **flat_props: Any,
    ) -> None:
        """
        :param model_data: the base model's weights in S3 (`ModelData.from_s3_prefix` / `from_s3_archive`).
        :param compute: what one base-model copy reserves; `min_memory_required_in_mb` is required.
        :param image: serving image. Default: `ContainerImage.from_asset()`, this library's
            `container/` (the only image that speaks the adapter contract this library relies on).
        :param vllm: vLLM engine options. Default `VllmOptions()` (4 GPU-resident adapters, rank <= 16).
        :param adapter_locations: the S3 bucket prefixes published adapters live under; the role
            gets one read grant per location, whatever the adapter count, and an S3 adapter outside
            every location is refused. More with `add_adapter_location`. Default: none (then only
            local archives, `AdapterArtifact.from_archive`, can be added).
        :param placement: where adapter components live. Default `FleetPlacement()`: hashed over
            8 nested stacks of at most 400 resources (about 3,000 adapters); fixed for the
            endpoint's life. `FleetPlacement.in_endpoint_stack()` keeps them in this stack.
        :param instances: what the endpoint runs on: the instance type or pools of types, counts
            (``min_count=0`` lets an idle endpoint release its last instance, docs/scaling.md), the
            volume, the AMI, the data cache, SSM access and a capacity reservation (`Instances`,
            each field's default documented there). Default `Instances()`: one ml.g6.2xlarge.
        :param base_copies: copies of the base component at creation, their startup timeouts and
            their spread over instances (`BaseCopies`). Default `BaseCopies()`: one copy, 20-minute
            timeouts, SageMaker's placement.
        :param allow_base_model: let requests without an adapter reach the base model. Default
            False: the container answers 400, so a dropped adapter header never silently returns
            un-fine-tuned output.
        :param allow_vision_modules: admit adapters that target a vision-language model's vision
            tower or connector when SageMaker registers them. Default False: vLLM serves LoRA on
            the language model only unless told otherwise.
        :param base_model: the base model adapters must name, its pinned revision, and its modules
            and shapes for the gate at synth (`BaseModelIdentity`). Default: nothing checked.
        :param environment: further container variables. Default none. May not override ours.
        :param role: execution role. Default: a least-privilege role created here.
        :param networking: the container's network isolation and the VPC, subnets and security
            groups of the instances (`Networking`). Default `Networking()`: no VPC, isolated.
        :param discovery_parameter_name: SSM parameter holding the discovery record (JSON, see
            `cdk_adapters.contract.discovery`). Default ``/cdk-adapters/<prefix>/inference-components``.
        :param request_metrics: what the container publishes per request (CloudWatch EMF): namespace,
            metric set, EMF on/off. Default `RequestMetrics()`: all ten metrics in ``CdkAdapters``.
        :param alarms: error-rate, p95-latency and cold-start-share alarms (and, off unless their
            thresholds are set, throttled-share and p95-queue-wait alarms) on the endpoint rollup,
            defaults for adapters that opt in (`add_adapter_alarms`), and an optional SNS topic.
            Default None: no alarms.
        :param dashboard: one CloudWatch dashboard named after the endpoint. Default True.
        :param dashboard_top_n: adapters in each per-adapter top-N table. Default 10; 1 to 100, and
            at most what keeps the dashboard within 500 series (65 with all ten metrics).
        :param adapter_limits: what every adapter may take from the shared engine (weight, places
            held, waiting requests, wait time; over a limit the caller gets 429 with Retry-After),
            unless `add_adapter` gives it its own. Default None: no limit, equal weights.
        :param adapter_capture: capture a sampled copy of every adapter's requests and answers to
            the endpoint's log (one JSON line each, for drift checks and ``cdk-adapters eval
            --from-capture``), unless `add_adapter` gives the adapter its own. Default None: nothing
            is captured. Prompts and answers then sit in CloudWatch Logs: see docs/evaluation.md.
        :param fair_share: let at most the engine's batch (``vllm.max_num_seqs``) into vLLM and queue
            the rest per adapter, released fairly, so one tenant's burst never queues ahead of
            another's; one place is kept for an adapter arriving with nothing in the engine, so it
            joins the running batch at once (docs/container.md, "Headroom"). Default True; False
            sends requests to vLLM as they come (first come, first served).
        :param deployment: rolling update with auto-rollback for the base component (applied on
            updates only, e.g. a new image or base model). Default None: SageMaker's default.
        :param logs: retention, customer managed key and removal policy of the two log groups the
            endpoint creates (``/aws/sagemaker/Endpoints/<endpoint>`` and
            ``/aws/sagemaker/InferenceComponents/<base component>``). Default `EndpointLogs()`: one
            year, CloudWatch Logs' own encryption, retained when the stack is deleted.
        :param observability: SageMaker's own metrics (the endpoint config's ``MetricsConfig``) and
            where it scrapes the container's Prometheus ``/metrics`` (docs/monitoring.md). Default
            `Observability()`: detailed observability stated explicitly, on only when
            ``request_metrics.emf`` is False, so per-adapter figures are billed once.
        :param routing: how requests are routed among instances and copies. Default
            `Routing()`: ``LEAST_OUTSTANDING_REQUESTS``.
        :param data_capture: `DataCapture(bucket, sampling_percentage, ...)` captures a sample of
            requests and responses to S3; the role may write under its prefix. Default None: off.
            Unconfirmed for endpoints with inference components (docs/constructs.md).
        :param deploy_check: `DeployCheck(...)` invokes every new or changed adapter once after
            CloudFormation creates or updates its component, and fails the deployment (rolling it
            back) when one errors, times out or is answered by the base model (docs/deploy-check.md).
            `add_adapter(check=AdapterCheck(...))` gives an adapter its own request. Default None: off.
        :param rank_tiers: `RankTier`s, base components of the model for ranks above ``vllm.max_lora_rank``
            (docs/rank-tiers.md); created as the `rank_tiers` attribute. Default None: one tier.
        :param flat_props: the props these option objects replaced (``instance_type=``,
            ``copy_count=``, ``base_model_id=``, ``vpc=``, ...), still accepted with a
            `FlatPropWarning` naming the new spelling (`cdk_adapters.endpoint.prop_groups`).
        """
        super().__init__(scope, id)
        self._subject_text = f"MultiAdapterEndpoint {self.node.path!r}"  # one jsii round trip, not one per adapter
        groups = prop_groups.regroup(
            {"instances": instances, "base_copies": base_copies, "base_model": base_model, "networking": networking},
            flat_props,
        )
        raise_if_any(prop_groups.type_problems(groups, self._subject), heading=f"{self._subject} is misconfigured")
        self.instances: Instances = groups["instances"] or Instances()
        self.base_copies: BaseCopies = groups["base_copies"] or BaseCopies()
        self.base_model: BaseModelIdentity = groups["base_model"] or BaseModelIdentity()
        self.networking: Networking = groups["networking"] or Networking()
        self.compute = compute or ComputeRequirements()
        self.vllm = vllm or VllmOptions()
        self.image = image or ContainerImage.from_asset()
        self.placement = placement or FleetPlacement()
        self.hosting = EndpointHosting(
            compute=self.compute,
            vllm=self.vllm,
            instances=self.instances,
            base_copies=self.base_copies,
            networking=self.networking,
            observability=observability,
            routing=routing,
            data_capture=data_capture,
        )
        """Instances, the variant and its options (`cdk_adapters.hosting.endpoint_hosting`)."""
        self.serving_policy = ServingPolicy(
            allow_base_model=allow_base_model,
            allow_vision_modules=allow_vision_modules,
            base_model_id=self.base_model.model_id,
            base_model_revision=self.base_model.revision,
            environment=dict(environment or {}),
        )
        self.adapter_locations: list[AdapterLocation] = []
        self.rank_tier_settings: Sequence[RankTier] = fixed_tiers(rank_tiers)
        self.aliases: dict[str, dict[str, int]] = {}
        self.prefix = self._derive_prefix()
        self.endpoint_name = self.prefix
        self.base_component_name = names.base_component_name(self.prefix)
        self.discovery_parameter_name = discovery_parameter_name or discovery_parameter.discovery_parameter_name(self.prefix)
        self.deployment = deployment
        self.adapter_settings = AdapterSettings(
            fair_share=fair_share,
            default_limits=adapter_limits,
            default_capture=adapter_capture,
            engine_batch=self.vllm.max_num_seqs,
            capture_log_group_arn=lambda: self.capture_log_group_arn,
        )
        """Fair share, limits and capture: the endpoint's defaults and each adapter's own."""
        self.log_settings = logs or EndpointLogs()
        self.deploy_check_settings = deploy_check
        self._canary_endpoint: MultiAdapterEndpoint | None = None
        self._canary_percent = 0
        self.monitoring = EndpointMonitoring(
            self,
            endpoint=self,
            request_metrics=request_metrics,
            alarms=alarms,
            deployment=deployment,
            dashboard=dashboard,
            dashboard_top_n=dashboard_top_n,
            fair_share=fair_share,
            subject=self._subject,
        )
        """Request metrics, alarms and the dashboard (`cdk_adapters.monitoring.endpoint_monitoring`)."""
        container_environment = self._checked_environment(model_data, adapter_locations or (), self.base_model.facts)

        # Everything below only creates constructs; all checks passed above.
        image_config, model_data_config = self._create_role(role, self.instances.volume_key, model_data, adapter_locations or ())
        vpc_placement = self._create_network_and_logs()
        served_environment = Lazy.any(ServingEnvironment(self.adapter_settings, container_environment))
        model = HostedModel(image_config.image_uri, served_environment, model_data_config.model_data_source)
        self.model, self.endpoint_config, self.endpoint = self.hosting.create(
            self,
            endpoint_name=self.endpoint_name,
            role=self.role,
            model=model,
            vpc_placement=vpc_placement,
            volume_key=self.volume_key,
            emf=self.monitoring.settings.emf,
        )
        """The SageMaker model, the endpoint config (one variant) and the endpoint (L1 resources)."""
        self.model.node.add_dependency(self.permissions.policy)
        self.endpoint_config.node.add_dependency(self.permissions.policy)
        self.endpoint_arn = endpoint_arn(self, self.endpoint_name)
        self._create_base_component(self.base_copies.count, deployment)
        self.rank_tiers: list[ServedTier] = create_tiers(self, model=model, environment=container_environment, vpc=vpc_placement)
        self._create_fleet_and_checks()

    def _checked_environment(
        self, model_data: ModelData, adapter_locations: Sequence[AdapterLocation], base_model_facts: BaseModelFacts | None
    ) -> dict[str, str]:
        """Every problem of every prop at once (nothing is created when there is one), then the container's environment."""
        subject = self._subject
        container_environment, problems = self.serving_policy.render(self.vllm, subject)
        self.compatibility_reference, reference_problems = serving_reference.owned_reference(
            self.serving_policy, self.vllm, base_model_facts, subject, tier_ranks=self.tier_ranks
        )
        """What `add_adapter` checks local archives against: the base facts (when given), the
        served ``--max-lora-rank`` and `allow_vision_modules`, as the container checks them."""
        problems += reference_problems
        problems += tier_problems(self.rank_tier_settings, self.vllm, subject, self.deployment)
        problems += self.monitoring.problems(self.hosting.copy_count)
        problems += self.hosting.instance_type_problems(subject)
        problems += self.hosting.count_and_volume_problems(subject)
        problems += self.networking.problems(subject)
        problems += self.log_settings.problems(subject)
        problems += self.hosting.option_problems(subject, extra=[("deploy_check", DeployCheck, self.deploy_check_settings)])
        for part in (self.placement, self.compute, self.base_copies.startup, self.vllm):
            problems += part.problems(subject)
        problems += self.adapter_settings.default_problems(subject)
        problems += self.image.problems(subject)
        problems += model_data.problems(subject)
        for index, location in enumerate(adapter_locations):
            problems += location.problems(subject, f"adapter_locations[{index}]")
        if Token.is_unresolved(Stack.of(self).stack_name):
            problems.append(Problem(subject, "stack_name", "the stack name must be known at synth to derive component names"))
        raise_if_any(problems, heading=f"MultiAdapterEndpoint {self.node.path!r} is misconfigured")
        container_environment.update(self.monitoring.settings.environment(self.endpoint_name, subject))
        # Whichever name SageMaker sends the container (component or adapter), it keys one identity.
        container_environment.update(adapter_identity.environment(self.prefix))
        return container_environment

    def _create_role(
        self,
        role: iam.IRole | None,
        volume_key: kms.IKey | None,
        model_data: ModelData,
        adapter_locations: Sequence[AdapterLocation],
    ) -> tuple[ContainerImageConfig, ModelDataConfig]:
        """The execution role, the image and model data it reads, the instance volumes' key, and the
        role's least-privilege policy."""
        self.role: iam.IRole = role or iam.Role(
            self,
            "ExecutionRole",
            assumed_by=sagemaker_principal(self),
            description=f"SageMaker execution role of multi-adapter endpoint {self.prefix}",
        )
        image_config = self.image.bind(self)
        model_data_config = model_data.bind()
        self.volume_key: kms.IKey | None = None
        if not self.hosting.local_storage:
            self.volume_key = volume_key or kms.Key(
                self,
                "VolumeKey",
                enable_key_rotation=True,
                description=f"Encrypts the instance volumes of SageMaker endpoint {self.prefix}",
            )
        self.permissions = ExecutionRolePermissions(
            self,
            "ExecutionRolePolicy",
            role=self.role,
            repository_arn=image_config.repository_arn,
            endpoint_name=self.endpoint_name,
            base_component_name=self.base_component_name,
            model_data_statements=model_data_config.statements,
            volume_key=self.volume_key,
        )
        for location in adapter_locations:
            self._add_location(location)
        if self.hosting.data_capture is not None:
            self.permissions.add_statements(self.hosting.data_capture.statements(), REASON_CAPTURE_PREFIX)
        return image_config, model_data_config

    def _create_network_and_logs(self) -> VpcPlacement | None:
        """Security groups (in a VPC), the logs' key and the log groups; the ``VpcConfig`` values."""
        vpc_placement, self.security_groups = self.networking.bind(
            self, f"SageMaker endpoint {self.prefix}: no ingress; egress for S3 and ECR"
        )
        if self.networking.vpc is not None and vpc_placement is not None:
            self.permissions.add_vpc_access(self.networking.vpc, vpc_placement)
        self.log_settings = with_logs_key(
            self, "LogsKey", self.log_settings, f"Encrypts the log groups of SageMaker endpoint {self.prefix}"
        )
        """The log settings with the key the groups use (created unless given or service managed)."""
        self.log_groups = EndpointLogGroups(
            self,
            "Logs",
            settings=self.log_settings,
            endpoint_name=self.endpoint_name,
            base_component_name=self.base_component_name,
        )
        """The endpoint's, the base component's and the capture log groups (the role cannot create groups)."""
        return vpc_placement

    def _create_base_component(self, copy_count: int, deployment: RollingUpdate | None) -> None:
        """The base component, after the log groups; the endpoint's alarms and its rolling update."""
        self.base_component = BaseInferenceComponent(
            self,
            "BaseComponent",
            inference_component_name=self.base_component_name,
            model_name=self.model.attr_model_name,
            copy_count=copy_count,
            **base_component_options(self),
        )
        self.base_component.node.add_dependency(self.permissions.policy)
        for resource in (self.endpoint, self.base_component.resource):
            for group in self.log_groups.resources:
                resource.add_resource_dependency(group)
        self.endpoint_alarms = self.monitoring.create_endpoint_alarms()
        """The endpoint's alarms by kind (``error_rate``, ``latency_p95``, ``cold_start_share``)."""
        if deployment is not None:
            self.base_component.resource.deployment_config = deployment.render(self.endpoint_alarms)

    def _create_fleet_and_checks(self) -> None:
        """The adapters' fleet, the deploy check, the discovery record, the synth-time validations, the dashboard."""
        self.fleet = AdapterFleet(
            self,
            "Adapters",
            placement=self.placement,
            base=self.base_component,
            endpoint_name=self.endpoint.attr_endpoint_name,
            prerequisites=[self.permissions.policy.node.default_child],  # type: ignore[list-item]  # the Policy's CfnPolicy
            tier_bases=[tier.base_component for tier in self.rank_tiers],
        )
        self.deploy_check: AdapterDeployCheck | None = None
        """The deploy check (`deploy_check=`): its function, provider and custom resource."""
        if self.deploy_check_settings is not None:
            self.deploy_check = AdapterDeployCheck(
                self,
                "DeployCheck",
                settings=self.deploy_check_settings,
                endpoint_name=self.endpoint.attr_endpoint_name,
                endpoint_arn=self.endpoint_arn,
                component_prefix=self.prefix,
                base_component_name=self.base_component_name,
                tier_component_names=[tier.inference_component_name for tier in self.rank_tiers],
                log_settings=self.log_settings,
                vpc=self.networking.vpc,
                vpc_subnets=self.networking.vpc_subnets,
                after=[self.base_component.resource],
            )
        self.discovery_parameter = discovery_parameter.publish_discovery(
            self,
            parameter_name=self.discovery_parameter_name,
            endpoint_name=self.endpoint.attr_endpoint_name,
            base_component_name=self.base_component_name,
            component_prefix=self.prefix,
            record=self.discovery_record,
        )
        self.node.add_validation(AliasValidation(self))
        self.node.add_validation(SettingsSizeValidation(self.adapter_settings, self._subject))
        self._invoke_grants = InvokeGrants(self)
        self.node.add_validation(self._invoke_grants)
        self.node.add_validation(AdapterNamesValidation(self))
        self.dashboard = self.monitoring.create_dashboard(
            base_component=self.base_component,
            variant_name=VARIANT_NAME,
            tiers={t.max_lora_rank: t.base_component for t in self.rank_tiers},
        )

    # ------------------------------------------------------------------ import

    @staticmethod
    def from_endpoint_attributes(scope: Construct, id: str, **attributes: Any) -> ImportedMultiAdapterEndpoint:
        """An endpoint deployed elsewhere (another stack or CDK app), from plain attributes; no
        account lookup. See `ImportedMultiAdapterEndpoint` for the attributes."""
        from cdk_adapters.endpoint.imported import ImportedMultiAdapterEndpoint

        return ImportedMultiAdapterEndpoint.from_endpoint_attributes(scope, id, **attributes)

    @staticmethod
    def from_discovery_parameter(
        scope: Construct, id: str, *, parameter_name: str, **attributes: Any
    ) -> ImportedMultiAdapterEndpoint:
        """An endpoint deployed elsewhere, read from its discovery record (a synth-time SSM lookup
        cached in ``cdk.context.json``), serving reference and aliases included."""
        from cdk_adapters.endpoint.imported import ImportedMultiAdapterEndpoint

        return ImportedMultiAdapterEndpoint.from_discovery_parameter(scope, id, parameter_name=parameter_name, **attributes)

    @property
    def component_prefix(self) -> str:
        """Adapter components are named ``<component_prefix>-<adapter, lower-cased>``."""
        return self.prefix

    # ------------------------------------------------------------------ adapters

    def add_adapter(
        self,
        name: str,
        *,
        artifact: AdapterArtifact,
        acknowledge: Acknowledgment | None = None,
        limits: AdapterLimits | None = None,
        capture: capture_record.CaptureSettings | None = None,
        check: AdapterCheck | None = None,
        rank: int | None = None,
        tier: int | None = None,
    ) -> AdapterInferenceComponent:
        """Serve one LoRA adapter as its own inference component, named ``<prefix>-<name>``.

        `name` must end with a version suffix ``-v<N>``, as in a manifest (the ``version-suffix``
        rule: a published name never changes content). `acknowledge`, e.g.
        ``Acknowledgment("version-suffix", "the name is fixed by the tenant's contract")``, accepts
        one acknowledgeable rule's finding for this adapter, as a manifest row's ``acknowledge``
        does. A local archive goes through the compatibility gate here (`compatibility_reference`).
        `limits` bounds what this adapter takes from the shared engine (default: the endpoint's
        `adapter_limits`). Limits are serving configuration: setting or changing one changes the
        model's environment, so the base component rolls to a new model (adapters are untouched).
        `capture` samples this adapter's requests and answers into the endpoint's log (default: the
        endpoint's `adapter_capture`); it is serving configuration too, with the same effect.
        `check` is this adapter's own deploy-check request and expected answer (needs the
        endpoint's `deploy_check`; default: the endpoint's request, any answer of its own).
        `rank` (the adapter's highest LoRA rank) picks its rank tier, the smallest that holds it;
        needed with `rank_tiers` (default None: the first tier, as with one tier). `tier` (a tier's
        ``max_lora_rank``) pins the tier instead, e.g. to keep an adapter where it is when a tier is inserted below it.

        Adds exactly one resource (the component) and changes no other: its construct ID derives
        from `name` alone, its placement from `name` and the fixed shard count, and the role
        already reads its archive through an adapter location. A local archive also adds its
        object to the local-archive policy.
        """
        subject = f"adapter {name!r} of {self._subject}"
        problems = adapter_checks.name_and_artifact_problems(
            name,
            artifact,
            acknowledge,
            known=self.adapters,
            is_added=lambda added: self.fleet.component(added) is not None,
            subject=subject,
        )
        problems += self.adapter_settings.adapter_problems(limits, capture, subject)
        problems += adapter_checks.check_request_problems(
            check,
            has_deploy_check=self.deploy_check is not None,
            subject=subject,
            how_to_add="needs the endpoint's deploy check: MultiAdapterEndpoint(deploy_check=DeployCheck(...))",
        )
        tier_rank, rank_problems = adapter_checks.attach_tier(name, artifact, rank, tier, self.tier_ranks, subject)
        problems += rank_problems
        if not problems:
            problems += adapter_checks.gate_problems(
                name, artifact, self.compatibility_reference, self._location_problems, subject
            )
            alarms = self.monitoring.opted_in_alarm_count(name)
            what = "its component" if not alarms else f"its component and {alarms} alarm(s)"
            problems += self.fleet.capacity_problems(name, subject, resources=1 + alarms, what=what)
        raise_if_any(problems, heading=f"cannot add adapter {name!r} to {self._subject}")
        base = self.tier_base(tier_rank)
        component = self.fleet.add(name, adapter_component_name(self.prefix, name), artifact, base=base)
        self.adapter_settings.add(name, limits, capture)
        if self.deploy_check is not None:
            self.deploy_check.track(component, check)
        self.monitoring.bind_adapter(name, component, subject)
        config = component.artifact_config
        if config.asset_object_arn is not None:
            self.permissions.add_local_archive(config.asset_object_arn, config.asset_kms_key_arn)
            assert self.permissions.local_archive_policy is not None
            self.fleet.add_prerequisite(self.permissions.local_archive_policy.node.default_child)  # type: ignore[arg-type]  # its CfnPolicy
        return component

    def add_adapter_alarms(self, adapter: str, overrides: Mapping[str, Any] | None = None) -> dict[str, cloudwatch.Alarm]:
        """Alarms on one adapter's request metrics: the endpoint's adapter defaults
        (``alarms.adapters``) with `overrides` (`AlarmThresholds` field names; None turns one off).

        The alarms are children of the adapter's component, in its stack (shard), and change no
        other resource. Refused, with nothing created, for an adapter that is not added, unknown
        threshold names, metrics the container does not publish, alarms already added, or a shard
        that would pass its capacity.
        """
        return self.monitoring.add_adapter_alarms(adapter, self.fleet.component(adapter), overrides)

    def set_canary(self, canary: MultiAdapterEndpoint, *, traffic_percent: int) -> None:
        """Name `canary` (an endpoint serving copies of some of these adapters on a candidate base
        model or image) in this endpoint's discovery record, so clients send it `traffic_percent`
        of the calls to the adapters it serves. Checked at synth: it must serve at least one
        adapter, each of which this endpoint serves too."""
        subject = f"canary of MultiAdapterEndpoint {self.node.path!r}"
        problems = []
        if canary is self:
            problems.append(Problem(subject, "canary", "must be another endpoint"))
        if self._canary_endpoint is not None:
            problems.append(
                Problem(subject, "canary", f"is set already ({self._canary_endpoint.node.path!r}); an endpoint has one canary")
            )
        if isinstance(traffic_percent, bool) or not isinstance(traffic_percent, int) or not 1 <= traffic_percent <= 50:
            problems.append(Problem(subject, "traffic_percent", f"must be an integer from 1 to 50, got {traffic_percent!r}"))
        raise_if_any(problems, heading="cannot set the canary")
        self._canary_endpoint = canary
        self._canary_percent = traffic_percent

    def add_adapter_location(self, location: AdapterLocation) -> None:
        """Let the role read (and adapters come from) one more bucket prefix."""
        raise_if_any(location.problems(self._subject, "adapter_location"), heading="cannot add adapter location")
        self._add_location(location)

    def add_alias(self, alias: str, targets: str | Mapping[str, int]) -> None:
        """Publish a stable name for a versioned adapter (``"support-en" -> "support-en-v4"``) or a
        weighted split (``{"support-en-v4": 90, "support-en-v5": 10}``) in the discovery record.

        Changing an alias changes only the discovery parameter's value, never a component:
        rolling back is one changed alias. Targets are checked against the adapters at synth.
        """
        weighted = {targets: 100} if isinstance(targets, str) else dict(targets)
        subject = f"alias {alias!r} of MultiAdapterEndpoint {self.node.path!r}"
        problems = [Problem(subject, "name", message) for message in alias_name_problems(alias)] + [
            Problem(subject, "targets", message) for _, message in alias_problems({alias: weighted})
        ]
        if isinstance(alias, str) and adapter_name_key(alias) in {adapter_name_key(known) for known in self.aliases}:
            problems.append(Problem(subject, "name", "is already added"))
        raise_if_any(problems, heading=f"cannot add alias {alias!r}")
        self.aliases[alias] = weighted

    @property
    def adapters(self) -> dict[str, AdapterInferenceComponent]:
        """Adapter name -> its component, in the order added."""
        return {component.adapter_name: component for component in self.fleet.components.values()}

    def adapter_component_names(self) -> dict[str, str]:
        """Adapter name -> inference component name: what a client passes as ``InferenceComponentName``."""
        return {component.adapter_name: component.inference_component_name for component in self.fleet.components.values()}

    def discovery_record(self) -> DiscoveryRecord:
        """What the discovery parameter holds (rendered at synth, after every adapter and alias)."""
        return DiscoveryRecord(
            endpoint_name=self.endpoint_name,
            base_inference_component_name=self.base_component_name,
            component_prefix=self.prefix,
            allow_base_model=self.serving_policy.allow_base_model,
            aliases={alias: dict(targets) for alias, targets in self.aliases.items()},
            canary=self._canary_record(),
            serving=serving_reference.publish(
                self.compatibility_reference, self.adapter_locations, tiers=self._published_tiers()
            ),
        )

    @property
    def tier_ranks(self) -> tuple[int, ...]:
        """Every tier's ``max_lora_rank``, smallest (the endpoint's own base component) first."""
        return tiers_ranks(self.vllm, self.rank_tier_settings)

    def tier_base(self, rank: int | None) -> BaseInferenceComponent:
        """The base component an adapter of `rank` attaches to (None: the first tier's)."""
        held = smallest_tier_holding(rank, self.tier_ranks) if rank is not None else None
        if rank is not None and held is None:
            raise ConfigurationError(
                [Problem(self._subject, "rank", f"{rank} is above every tier's max_lora_rank {self.tier_ranks}")]
            )
        if held is None or held == self.tier_ranks[0]:
            return self.base_component
        [tier] = [tier for tier in self.rank_tiers if tier.max_lora_rank == held]
        return tier.base_component

    def _published_tiers(self) -> tuple[tuple[int, str], ...]:
        if not self.rank_tiers:
            return ()
        first = (self.tier_ranks[0], self.base_component_name)
        return (first, *((tier.max_lora_rank, tier.inference_component_name) for tier in self.rank_tiers))

    def _canary_record(self) -> CanaryRecord | None:
        canary = self._canary_endpoint
        if canary is None:
            return None
        return CanaryRecord(
            endpoint_name=canary.endpoint_name,
            base_inference_component_name=canary.base_component_name,
            component_prefix=canary.prefix,
            adapters=tuple(canary.adapters),
            traffic_percent=self._canary_percent,
        )

    # ------------------------------------------------------------------ grants and metrics

    def grant_invoke(self, grantee: iam.IGrantable, adapters: Sequence[str] | None = None) -> iam.Grant:
        """Let `grantee` invoke this endpoint's adapters, wherever a client sends their calls.

        `adapters` names adapters or aliases (an alias grants every target); default all of this
        endpoint's components, present and future, through the ``<prefix>-*`` name pattern, so
        adding an adapter later never rewrites the grantee's policy. With a canary
        (`set_canary`), the grant also covers the canary endpoint and its components of the
        granted adapters, because clients send it its share of their calls. The resources are
        rendered at synth, so the order of `grant_invoke`, `add_adapter`, `add_alias` and
        `set_canary` calls does not matter; names that are no adapter or alias fail synth.

        IAM authorizes both actions against the endpoint and the ``inference-component`` resource
        types (Service Authorization Reference), so the component ARNs really limit which adapters
        the grantee can call. An empty list is refused: it would grant only the endpoint, which
        can invoke nothing.
        """
        leave_out = "every adapter (an empty list would grant the endpoint alone, which invokes nothing)"
        raise_if_any(granted_list_problems(adapters, self._subject, leave_out=leave_out))
        if adapters is not None:
            bad = [name for name in adapters if not isinstance(name, str)]
            if bad:
                raise ConfigurationError(
                    [Problem(self._subject, "grant_invoke.adapters", f"{name!r} is not an adapter or alias name") for name in bad]
                )
        return self._invoke_grants.add(grantee, adapters)

    @property
    def capture_log_group_arn(self) -> str:
        """The log group captured requests go to, one stream per adapter (`grant_read_capture`)."""
        return log_group_arn(self, capture_record.capture_log_group_name(self.endpoint_name))

    def grant_read_capture(self, grantee: iam.IGrantable, adapters: Sequence[str]) -> iam.Grant:
        """Let `grantee` read the captured requests and answers of `adapters`, and no other's.

        Each adapter's records sit in its own stream of the capture group (named by the adapter's
        name key); the grant is ``logs:GetLogEvents`` on exactly those streams. Never grant a
        tenant ``logs:FilterLogEvents``, ``logs:StartQuery`` or ``logs:DescribeLogStreams`` on the
        group: IAM authorizes those on the whole group, every tenant's stream included. The
        group's key needs no grant (CloudWatch Logs decrypts for a reader it authorizes).
        """
        return grant_read_capture(
            self,
            grantee,
            endpoint_name=self.endpoint_name,
            adapters=adapters,
            is_own=lambda name: self.fleet.component(name) is not None,
            subject=self._subject,
            not_own="is not an adapter of this endpoint (add it first)",
        )

    @property
    def canary_endpoint(self) -> MultiAdapterEndpoint | None:
        """The endpoint `set_canary` named, if any."""
        return self._canary_endpoint

    def grant_read_discovery(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` read the discovery parameter, by its literal ARN, so a client in another
        stack needs no cross-stack export."""
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
        component = self.fleet.component(adapter)
        if component is None:
            raise ConfigurationError([self._unknown_adapter("adapter", adapter)])
        return component

    def _unknown_adapter(self, field: str, adapter: object) -> Problem:
        return Problem(self._subject, field, f"{adapter!r} is not an adapter of this endpoint; add it first")

    # ------------------------------------------------------------------ internals

    @property
    def _subject(self) -> str:
        return self._subject_text

    def _derive_prefix(self) -> str:
        stack_name = Stack.of(self).stack_name
        if Token.is_unresolved(stack_name):
            return "unresolved"
        return names.component_prefix(stack_name, self.node.path)

    def _add_location(self, location: AdapterLocation) -> None:
        raise_if_any(
            location.assignment_problems(self.adapter_locations, self._subject), heading="cannot assign the adapter location"
        )
        self.adapter_locations.append(location)
        self.permissions.add_location(location)

    def _location_problems(self, artifact: AdapterArtifact, subject: str) -> list[Problem]:
        return adapter_checks.owned_location_problems(artifact, self.adapter_locations, subject)
