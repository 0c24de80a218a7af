"""What SageMaker itself publishes about the endpoint (`MetricsConfig`) and where it scrapes the
container's Prometheus metrics (the base component's ``ContainerMetricsConfig``).

Two sources can carry per-adapter figures, and both are billed as CloudWatch metrics:

* the container's EMF request lines (`RequestMetrics`, on by default): ten metrics per adapter
  in our namespace, which the alarms, the dashboard and the ``metric_*`` methods read;
* SageMaker's *detailed observability*: it scrapes the container's ``/metrics`` (vLLM's engine
  series and our ``cdk_adapters_*`` series, labelled by adapter) plus per-GPU, per-instance and
  placement metrics. SageMaker turns it on for every endpoint config created without a
  ``MetricsConfig`` (the API's documented default for new configs is True).

So the endpoint config always states detailed observability explicitly: by default it is on
exactly when EMF is off, so the per-adapter figures are published once, not twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aws_cdk import aws_sagemaker as sagemaker

from cdk_adapters.contract.runtime_api import METRICS_PATH
from cdk_adapters.problems import Problem

PUBLISH_FREQUENCIES_SECONDS = (10, 30, 60, 120, 180, 240, 300)
"""``MetricPublishFrequencyInSeconds``'s valid values (SageMaker API ``MetricsConfig`` and ``MetricsEndpoint``)."""
CONTAINER_METRICS_PATH = METRICS_PATH
"""Where the serving container serves Prometheus text on port 8080 (vLLM's series and ours)."""
METRICS_PATH_MAX_LENGTH = 256


def _is_bool_or_none(value: object) -> bool:
    return value is None or isinstance(value, bool)


@dataclass(frozen=True)
class Observability:
    """SageMaker's own metrics for the endpoint (the endpoint config's ``MetricsConfig``)."""

    detailed_observability: bool | None = None
    """Publish container metrics scraped from ``/metrics``, per-GPU, per-instance host and copy
    placement metrics. Default None: on exactly when the container's EMF metrics are off
    (``request_metrics.emf=False``), so per-adapter figures are not billed twice."""
    enhanced_metrics: bool = False
    """Utilization and invocation metrics at instance and container granularity. Default False
    (SageMaker's default; not rendered unless True)."""
    publish_frequency_seconds: int | None = None
    """How often SageMaker publishes (10, 30, 60, 120, 180, 240 or 300). Default None: SageMaker's 60."""
    container_metrics_path: str | None = CONTAINER_METRICS_PATH
    """Where the base component's container serves Prometheus text, rendered on the base component
    when detailed observability is on. Default ``/metrics`` (ours; also SageMaker's default path
    on port 8080). None: leave the container block out and let SageMaker use its default."""
    container_publish_frequency_seconds: int | None = None
    """How often the scraped container metrics are published. Default None: SageMaker's 60."""

    def problems(self, subject: str) -> list[Problem]:
        found: list[Problem] = []
        if not _is_bool_or_none(self.detailed_observability):
            message = f"must be True, False or None, got {self.detailed_observability!r}"
            found.append(Problem(subject, "observability.detailed_observability", message))
        if not isinstance(self.enhanced_metrics, bool):
            found.append(
                Problem(subject, "observability.enhanced_metrics", f"must be True or False, got {self.enhanced_metrics!r}")
            )
        allowed = ", ".join(map(str, PUBLISH_FREQUENCIES_SECONDS))
        for name in ("publish_frequency_seconds", "container_publish_frequency_seconds"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value not in PUBLISH_FREQUENCIES_SECONDS):
                found.append(
                    Problem(subject, f"observability.{name}", f"must be one of {allowed} (seconds) or None, got {value!r}")
                )
        path = self.container_metrics_path
        if path is not None and not _valid_metrics_path(path):
            found.append(
                Problem(
                    subject,
                    "observability.container_metrics_path",
                    f"must start with '/', hold only letters, digits, '/', '_', '.', '-', no '..', at most "
                    f"{METRICS_PATH_MAX_LENGTH} characters, got {path!r}",
                )
            )
        if path is None and self.container_publish_frequency_seconds is not None:
            found.append(
                Problem(
                    subject,
                    "observability.container_publish_frequency_seconds",
                    "needs container_metrics_path (the endpoint it applies to)",
                )
            )
        return found

    def detailed(self, emf: bool) -> bool:
        """Whether detailed observability is on, given whether the container publishes EMF."""
        return (not emf) if self.detailed_observability is None else self.detailed_observability

    def render_endpoint_config(self, emf: bool) -> sagemaker.CfnEndpointConfig.MetricsConfigProperty:
        return sagemaker.CfnEndpointConfig.MetricsConfigProperty(
            enable_detailed_observability=self.detailed(emf),
            enable_enhanced_metrics=True if self.enhanced_metrics else None,
            metric_publish_frequency_in_seconds=self.publish_frequency_seconds,
        )

    def render_container(
        self, emf: bool
    ) -> sagemaker.CfnInferenceComponent.InferenceComponentContainerSpecificationProperty | None:
        """The base component's ``Container`` block (its metrics endpoint only; the image and
        environment come from the model), or None when SageMaker scrapes nothing or
        `container_metrics_path` is None."""
        if not self.detailed(emf) or self.container_metrics_path is None:
            return None
        ic = sagemaker.CfnInferenceComponent
        endpoint = ic.MetricsEndpointProperty(
            metrics_endpoint_path=self.container_metrics_path,
            metric_publish_frequency_in_seconds=self.container_publish_frequency_seconds,
        )
        return ic.InferenceComponentContainerSpecificationProperty(
            container_metrics_config=ic.ContainerMetricsConfigProperty(metrics_endpoints=[endpoint])
        )


def _valid_metrics_path(path: object) -> bool:
    return (
        isinstance(path, str)
        and len(path) <= METRICS_PATH_MAX_LENGTH
        and re.fullmatch(r"/(?!.*\.\.)[a-zA-Z0-9/_.\-]+", path) is not None
    )
