"""The base inference component (runs the shared model) and one adapter component per LoRA adapter.

CloudFormation gives an inference component no name attribute, so both carry explicit names from
`cdk_adapters.endpoint.names`, and each adapter depends explicitly on the base: the base cannot be deleted
while adapters exist, and without the dependency CloudFormation would try.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.hosting.compute import ComputeRequirements, InstanceScaling, StartupTimeouts
from cdk_adapters.hosting.scaling import WAKE_UP_PERIOD, ScalableCopyCount
from cdk_adapters.monitoring.metric_source import RequestMetricMethods
from cdk_adapters.problems import ConfigurationError, Problem, raise_if_any

METRIC_NAMESPACE = "AWS/SageMaker"
"""Invocation metrics per inference component (dimension ``InferenceComponentName``)."""
UTILIZATION_NAMESPACE = "/aws/sagemaker/InferenceComponents"
"""Utilization metrics of the containers a component runs (same dimension)."""


def _render_compute(
    compute: ComputeRequirements,
) -> sagemaker.CfnInferenceComponent.InferenceComponentComputeResourceRequirementsProperty:
    return sagemaker.CfnInferenceComponent.InferenceComponentComputeResourceRequirementsProperty(
        min_memory_required_in_mb=compute.min_memory_required_in_mb,
        max_memory_required_in_mb=compute.max_memory_required_in_mb,
        number_of_accelerator_devices_required=compute.accelerator_devices,
        number_of_cpu_cores_required=compute.cpu_cores,
    )


class InferenceComponentMetrics:
    """``metric_*`` methods for any inference component: SageMaker publishes its invocation metrics
    in ``AWS/SageMaker`` with the dimension ``InferenceComponentName``, so a name is all they need.

    Each method takes the `cloudwatch.Metric` options (``period``, ``statistic``, ``label``, ...)
    and states its default statistic.
    """

    inference_component_name: str

    def metric(self, metric_name: str, *, namespace: str = METRIC_NAMESPACE, **props: Any) -> cloudwatch.Metric:
        """Any metric of this component. Default namespace ``AWS/SageMaker``."""
        return cloudwatch.Metric(
            namespace=namespace,
            metric_name=metric_name,
            dimensions_map={"InferenceComponentName": self.inference_component_name},
            **props,
        )

    def metric_invocations(self, **props: Any) -> cloudwatch.Metric:
        """Requests sent to this component. Default: Sum."""
        return self.metric("Invocations", **{"statistic": "Sum", **props})

    def metric_invocation_4xx_errors(self, **props: Any) -> cloudwatch.Metric:
        """Requests the container answered with 4xx (e.g. an adapter the container refused). Default: Sum."""
        return self.metric("Invocation4XXErrors", **{"statistic": "Sum", **props})

    def metric_invocation_5xx_errors(self, **props: Any) -> cloudwatch.Metric:
        """Requests the container answered with 5xx. Default: Sum."""
        return self.metric("Invocation5XXErrors", **{"statistic": "Sum", **props})

    def metric_model_latency(self, **props: Any) -> cloudwatch.Metric:
        """Microseconds the container took to answer. Default: p90."""
        return self.metric("ModelLatency", **{"statistic": "p90", **props})

    def metric_overhead_latency(self, **props: Any) -> cloudwatch.Metric:
        """Microseconds SageMaker added around the container (routing, auth). Default: p90."""
        return self.metric("OverheadLatency", **{"statistic": "p90", **props})


class BaseInferenceComponent(InferenceComponentMetrics, Construct):
    """The inference component that runs the base model; adapters attach to it.

    Besides the invocation metrics it has the per-copy and capacity metrics that autoscaling
    uses, and the utilization of its containers (which every adapter shares).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        inference_component_name: str,
        endpoint_name: str,
        variant_name: str,
        model_name: str,
        compute: ComputeRequirements,
        startup: StartupTimeouts,
        copy_count: int,
        instance_scaling: InstanceScaling | None = None,
        container: sagemaker.CfnInferenceComponent.InferenceComponentContainerSpecificationProperty | None = None,
        scheduling: sagemaker.CfnInferenceComponent.InferenceComponentSchedulingConfigProperty | None = None,
        data_cache: sagemaker.CfnInferenceComponent.InferenceComponentDataCacheConfigProperty | None = None,
    ) -> None:
        """
        :param copy_count: copies at creation (and in every later template; see `auto_scale_copy_count`).
        :param instance_scaling: the instances the endpoint may run, against which autoscaling's
            maximum copies are checked. With more than one instance type (instance pools) the
            component gets one specification per type (``Specifications``), each with that type's
            reservation; with one, the singular ``Specification`` with `compute`.
        :param container: the container block (its metrics endpoint; image and environment come
            from the model). Default: none.
        :param scheduling: copy placement (`cdk_adapters.hosting.copy_placement`). Default: SageMaker's.
        :param data_cache: per-instance cache of model data and image. Default: SageMaker's.
        """
        super().__init__(scope, id)
        download, health = startup.seconds()
        self.inference_component_name = inference_component_name
        self.compute = compute
        self.copy_count = copy_count
        self.instance_scaling = instance_scaling
        self.copy_scaling: ScalableCopyCount | None = None
        ic = sagemaker.CfnInferenceComponent
        startup_parameters = ic.InferenceComponentStartupParametersProperty(
            model_data_download_timeout_in_seconds=download,
            container_startup_health_check_timeout_in_seconds=health,
        )
        reservations = instance_scaling.reservations if instance_scaling is not None else ()
        single = len(reservations) <= 1
        self.resource = sagemaker.CfnInferenceComponent(
            self,
            "Resource",
            inference_component_name=inference_component_name,
            endpoint_name=endpoint_name,
            variant_name=variant_name,
            specification=ic.InferenceComponentSpecificationProperty(
                model_name=model_name,
                compute_resource_requirements=_render_compute(compute),
                startup_parameters=startup_parameters,
                container=container,
                scheduling_config=scheduling,
                data_cache_config=data_cache,
            )
            if single
            else None,
            # Instance pools: one specification per type, each with that type's reservation.
            specifications=None
            if single
            else [
                ic.InferenceComponentSpecificationForInstanceTypeProperty(
                    instance_type=name,
                    model_name=model_name,
                    compute_resource_requirements=_render_compute(reservation),
                    startup_parameters=startup_parameters,
                    container=ic.InferenceComponentContainerSpecificationForInstanceTypeProperty(
                        container_metrics_config=container.container_metrics_config
                    )
                    if container is not None
                    else None,
                    scheduling_config=scheduling,
                    data_cache_config=data_cache,
                )
                for name, reservation in reservations
            ],
            runtime_config=ic.InferenceComponentRuntimeConfigProperty(copy_count=copy_count),
        )
        self.inference_component_arn = self.resource.ref

    def auto_scale_copy_count(self, *, min_copies: int, max_copies: int) -> ScalableCopyCount:
        """Let Application Auto Scaling move the copy count within `min_copies`..`max_copies`.

        Then add a policy: ``scale_on_concurrent_requests(...)`` or ``scale_on_invocations(...)``,
        and with ``min_copies=0`` also ``scale_to_zero()``. The component's template keeps
        ``copy_count`` (the count every deploy creates it with), so scaling changes never touch it.
        Refused at once, with every problem, when the range is wrong or `max_copies` cannot fit on
        the endpoint's ``Instances.max_count`` instances.
        """
        problems = ScalableCopyCount.problems(
            inference_component_name=self.inference_component_name,
            min_copies=min_copies,
            max_copies=max_copies,
            copy_count=self.copy_count,
            instance_scaling=self.instance_scaling,
        )
        if self.copy_scaling is not None:
            problems.append(
                Problem(
                    f"base inference component {self.inference_component_name!r}",
                    "auto_scale_copy_count",
                    "is already set; call it once",
                )
            )
        raise_if_any(problems, heading=f"cannot autoscale {self.inference_component_name!r}")
        self.copy_scaling = ScalableCopyCount(
            self,
            "CopyScaling",
            inference_component_name=self.inference_component_name,
            component=self.resource,
            min_copies=min_copies,
            max_copies=max_copies,
            instance_scaling=self.instance_scaling,
            no_capacity_failures=self.metric_no_capacity_invocation_failures(period=WAKE_UP_PERIOD, statistic="Maximum"),
        )
        return self.copy_scaling

    def metric_invocations_per_copy(self, **props: Any) -> cloudwatch.Metric:
        """Requests per copy of the base model; the target-tracking scaling signal. Default: Sum."""
        return self.metric("InvocationsPerCopy", **{"statistic": "Sum", **props})

    def metric_no_capacity_invocation_failures(self, **props: Any) -> cloudwatch.Metric:
        """Requests refused because no copy was running (scale from zero). Default: Sum."""
        return self.metric("NoCapacityInvocationFailures", **{"statistic": "Sum", **props})

    def metric_gpu_utilization(self, **props: Any) -> cloudwatch.Metric:
        """GPU utilization of this component's containers, normalized to 0-100 %. Default: Average."""
        return self.metric("GPUUtilizationNormalized", namespace=UTILIZATION_NAMESPACE, **{"statistic": "Average", **props})

    def metric_gpu_memory_utilization(self, **props: Any) -> cloudwatch.Metric:
        """GPU memory utilization, normalized to 0-100 %. vLLM reserves most of it up front. Default: Average."""
        return self.metric("GPUMemoryUtilizationNormalized", namespace=UTILIZATION_NAMESPACE, **{"statistic": "Average", **props})

    def metric_cpu_utilization(self, **props: Any) -> cloudwatch.Metric:
        """CPU utilization, normalized to 0-100 %. Default: Average."""
        return self.metric("CPUUtilizationNormalized", namespace=UTILIZATION_NAMESPACE, **{"statistic": "Average", **props})

    def metric_memory_utilization(self, **props: Any) -> cloudwatch.Metric:
        """Host memory utilization, normalized to 0-100 %. Default: Average."""
        return self.metric("MemoryUtilizationNormalized", namespace=UTILIZATION_NAMESPACE, **{"statistic": "Average", **props})


class AdapterInferenceComponent(RequestMetricMethods, InferenceComponentMetrics, Construct):
    """One LoRA adapter, served by the base component's containers.

    Two sets of ``metric_*`` methods: SageMaker's ``AWS/SageMaker`` invocation metrics
    (``metric_invocations``, ...; whether SageMaker publishes them for adapter components is
    unconfirmed) and the serving container's own request metrics (``metric_request_latency``,
    ``metric_time_to_first_token``, ``metric_prompt_tokens``, ``metric_output_tokens``,
    ``metric_request_errors_4xx``/``_5xx``, ``metric_cold_starts``, ``metric_error_rate``,
    ``metric_cold_start_share``), bound by the endpoint that serves it.

    It carries only what SageMaker allows for an adapter: the endpoint, its own name, the base
    component's name and the artifact URL (no variant, compute, runtime config or model). Its
    invocation metrics are its own; utilization belongs to the base component, whose containers
    serve it. It creates nothing else: the role reads its archive through the endpoint's adapter
    locations (or, for a local archive, the endpoint grants `artifact_config.asset_object_arn`),
    and the fleet orders it after the base component, so adding an adapter adds one resource.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        adapter_name: str,
        inference_component_name: str,
        endpoint_name: str,
        base_component_name: str,
        artifact: AdapterArtifact,
    ) -> None:
        super().__init__(scope, id)
        self.artifact_config = artifact.bind(self)
        self.adapter_name = adapter_name
        self.inference_component_name = inference_component_name
        self.base_component_name = base_component_name
        """The base component it is attached to (a rank tier's, or the endpoint's)."""
        self.artifact_url = self.artifact_config.s3_url
        self.resource = sagemaker.CfnInferenceComponent(
            self,
            "Resource",
            inference_component_name=inference_component_name,
            endpoint_name=endpoint_name,
            specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                base_inference_component_name=base_component_name,
                container=sagemaker.CfnInferenceComponent.InferenceComponentContainerSpecificationProperty(
                    artifact_url=self.artifact_url
                ),
            ),
        )

    @property
    def inference_component_arn(self) -> str:
        """The component's ARN (its ``Ref``); read on demand, not on the per-adapter path."""
        return self.resource.ref

    def auto_scale_copy_count(self, **_: Any) -> ScalableCopyCount:
        """Always refused: an adapter has no copies of its own to scale."""
        raise ConfigurationError(
            [
                Problem(
                    f"adapter component {self.inference_component_name!r}",
                    "auto_scale_copy_count",
                    "adapter components have no copies: an adapter runs on every copy of the base component, "
                    "so scale the base (endpoint.base_component.auto_scale_copy_count(...)) and the adapters follow",
                )
            ],
            heading=f"cannot autoscale adapter {self.adapter_name!r}",
        )
