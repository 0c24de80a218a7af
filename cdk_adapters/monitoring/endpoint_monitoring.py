"""The monitoring of one `MultiAdapterEndpoint`: its request-metric source, alarms and dashboard.

The endpoint owns the resources it serves with; this owns what watches them, so the endpoint's
constructor only asks for the problems, then for the alarms and the dashboard at the points where
they can be built. Construct ids are kept exactly as the endpoint created them (``Alarms`` and
``Dashboard`` under the endpoint, ``Alarms`` under an adapter's component), because logical ids
are a public contract.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from aws_cdk import Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct, IConstruct

from cdk_adapters.contract.adapter_names import adapter_name_key
from cdk_adapters.monitoring import alarms as monitoring_alarms
from cdk_adapters.monitoring.alarms import MonitoringAlarms
from cdk_adapters.monitoring.dashboard import EndpointDashboard, dashboard_top_n_problems
from cdk_adapters.monitoring.metric_source import RequestMetrics, RequestMetricSource
from cdk_adapters.problems import ConfigurationError, Problem, raise_if_any

if TYPE_CHECKING:
    from cdk_adapters.hosting.rolling_update import RollingUpdate


class _AlarmCapacity(Protocol):
    """What adapter alarms need of the fleet: room in the adapter's shard, and reserving it."""

    def capacity_problems(self, name: str, subject: str, *, resources: int, what: str) -> list[Problem]: ...
    def reserve(self, name: str, resources: int) -> None: ...


class MonitoredEndpoint(IConstruct, Protocol):
    """What the monitoring reads of a `MultiAdapterEndpoint` (described here, so that monitoring
    imports nothing of the endpoint): its names and, once created, its fleet."""

    @property
    def endpoint_name(self) -> str: ...
    @property
    def prefix(self) -> str: ...
    @property
    def fleet(self) -> _AlarmCapacity: ...


class EndpointMonitoring:
    """Request metrics, alarms and the dashboard of one endpoint (a helper, not a construct)."""

    def __init__(
        self,
        scope: Construct,
        *,
        endpoint: MonitoredEndpoint,
        request_metrics: RequestMetrics | None,
        alarms: MonitoringAlarms | None,
        deployment: RollingUpdate | None,
        dashboard: bool,
        dashboard_top_n: int,
        fair_share: bool = True,
        subject: str,
    ) -> None:
        """No constructs are created here: `create_endpoint_alarms` and `create_dashboard` do."""
        self._scope = scope
        """Where the alarms and the dashboard are created (the endpoint construct)."""
        self._endpoint = endpoint
        self._subject = subject
        self.settings = request_metrics or RequestMetrics()
        """What the container publishes per request (the endpoint's ``request_metrics`` prop)."""
        self.alarm_settings = alarms
        """The endpoint's ``alarms`` prop."""
        self._deployment = deployment
        self._dashboard_wanted = dashboard
        self._dashboard_top_n = dashboard_top_n
        self._fair_share = fair_share
        self.rollup = RequestMetricSource(self.settings, endpoint.endpoint_name, subject=f"request metrics of {subject}")
        """The endpoint rollup of the container's request metrics (``{EndpointName}``)."""
        self.endpoint_alarms: dict[str, cloudwatch.Alarm] = {}
        """The endpoint's alarms by kind (``error_rate``, ``latency_p95``, ``cold_start_share``)."""
        self.adapter_alarms: dict[str, dict[str, cloudwatch.Alarm]] = {}
        """Adapter name -> its alarms by kind, for adapters that opted in."""
        self.dashboard: EndpointDashboard | None = None
        self._alarmed: set[str] = set()
        self._opted_in = frozenset(adapter_name_key(name) for name in self.opted_in_names())

    # ------------------------------------------------------------------ checks

    def opted_in_names(self) -> Sequence[str]:
        """Adapters that opt in to alarms by name (``alarms.adapter_names``)."""
        settings = self.alarm_settings
        if settings is None or isinstance(settings.adapter_names, str):
            return ()
        return settings.adapter_names

    def problems(self, copy_count: int) -> list[Problem]:
        """Request-metric settings, alarm thresholds, the rollback configuration and the dashboard."""
        problems = self.settings.problems(self._subject)
        endpoint_kinds: tuple[str, ...] = ()
        if self.alarm_settings is not None:
            problems += self.alarm_settings.problems(self._subject)
            if self.alarm_settings.endpoint is not None:
                endpoint_kinds = self.alarm_settings.endpoint.enabled
                problems += monitoring_alarms.metric_problems(
                    self.alarm_settings.endpoint, self.rollup, "alarms.endpoint", fair_share=self._fair_share
                )
        if self._deployment is not None:
            problems += self._deployment.problems(self._subject, copy_count, endpoint_kinds)
        top_n = self._dashboard_top_n
        if isinstance(top_n, bool) or not isinstance(top_n, int) or not 1 <= top_n <= 100:
            problems.append(Problem(self._subject, "dashboard_top_n", f"must be an integer from 1 to 100, got {top_n!r}"))
        elif self._dashboard_wanted:
            problems += dashboard_top_n_problems(top_n, self.settings.published, self._subject)
        return problems

    def opted_in_alarm_count(self, name: str) -> int:
        """Alarms an adapter opted in by name gets with its component (checked together, so a
        refusal creates nothing)."""
        if self.alarm_settings is None or adapter_name_key(name) not in self._opted_in:
            return 0
        return len(self.alarm_settings.adapters.enabled)

    # ------------------------------------------------------------------ constructs

    def create_endpoint_alarms(self) -> dict[str, cloudwatch.Alarm]:
        """The endpoint rollup's alarms, under ``<endpoint>/Alarms`` (none without ``alarms.endpoint``)."""
        settings = self.alarm_settings
        if settings is not None and settings.endpoint is not None:
            deployment = self._deployment
            self.endpoint_alarms = monitoring_alarms.create_alarms(
                Construct(self._scope, "Alarms"),
                source=self.rollup,
                thresholds=settings.endpoint,
                name_prefix=self._endpoint.prefix,
                what=f"endpoint {self._endpoint.endpoint_name}",
                topic=settings.topic,
                rollback_kinds=tuple(deployment.rollback_on_endpoint_alarms) if deployment is not None else (),
                on_dashboard=self._dashboard_wanted,
                runbook_url=settings.runbook_url,
            )
        return self.endpoint_alarms

    def bind_adapter(self, name: str, component: Any, subject: str) -> None:
        """Bind an added adapter's request metrics, and add its alarms if it opted in by name."""
        # The container's Adapter dimension is the adapter key (`adapter_identity`), whichever name
        # SageMaker sends it; query the same value.
        component.bind_request_metrics(self.rollup.for_adapter(adapter_name_key(name), subject))
        if adapter_name_key(name) in self._opted_in:
            self.add_adapter_alarms(name, component)

    def add_adapter_alarms(
        self, adapter: str, component: Any | None, overrides: Mapping[str, Any] | None = None
    ) -> dict[str, cloudwatch.Alarm]:
        """See `MultiAdapterEndpoint.add_adapter_alarms`; `component` is None for an unknown adapter."""
        subject = f"adapter {adapter!r} of MultiAdapterEndpoint {self._endpoint.node.path!r}"
        heading = f"cannot add alarms to adapter {adapter!r}"
        if component is None:
            raise ConfigurationError(
                [Problem(subject, "alarms", "is not an adapter of this endpoint; add the adapter before its alarms")],
                heading=heading,
            )
        problems: list[Problem] = []
        if self.alarm_settings is None:
            problems.append(
                Problem(subject, "alarms", "needs the endpoint's alarms on: MultiAdapterEndpoint(alarms=MonitoringAlarms(...))")
            )
        unknown = sorted(set(overrides or {}) - set(monitoring_alarms.THRESHOLD_FIELDS))
        for key in unknown:
            problems.append(
                Problem(
                    subject, f"alarms.{key}", f"is not an alarm setting; known: {', '.join(monitoring_alarms.THRESHOLD_FIELDS)}"
                )
            )
        if adapter_name_key(adapter) in self._alarmed:
            problems.append(Problem(subject, "alarms", "are already added"))
        raise_if_any(problems, heading=heading)
        assert self.alarm_settings is not None
        thresholds = self.alarm_settings.adapters.override(overrides or {})
        problems = thresholds.problems(subject)
        problems += monitoring_alarms.metric_problems(
            thresholds, component.request_metric_source, "alarms", fair_share=self._fair_share
        )
        fleet = self._endpoint.fleet
        count = len(thresholds.enabled)
        problems += fleet.capacity_problems(adapter, subject, resources=count, what=f"{count} alarm(s)")
        raise_if_any(problems, heading=heading)
        created = monitoring_alarms.create_alarms(
            Construct(component, "Alarms"),
            source=component.request_metric_source,
            thresholds=thresholds,
            name_prefix=component.inference_component_name,
            what=f"adapter {component.adapter_name} on endpoint {self._endpoint.endpoint_name}",
            topic=self.alarm_settings.topic,
            runbook_url=self.alarm_settings.runbook_url,
        )
        self.adapter_alarms[component.adapter_name] = created
        self._alarmed.add(adapter_name_key(adapter))
        fleet.reserve(adapter, len(created))
        return created

    def create_dashboard(
        self, *, base_component: Any, variant_name: str, tiers: Mapping[int, Any] | None = None
    ) -> EndpointDashboard | None:
        """The endpoint's dashboard under ``<endpoint>/Dashboard`` (None with ``dashboard=False``);
        `tiers` (rank -> base component) are the rank tiers above the first."""
        if not self._dashboard_wanted:
            return None
        endpoint = self._endpoint
        self.dashboard = EndpointDashboard(
            self._scope,
            "Dashboard",
            # Dashboards are global, not per region (CloudFormation's AWS::CloudWatch::Dashboard):
            # the region keeps the same stack in two regions from fighting over one name.
            dashboard_name=f"{endpoint.prefix}-{Stack.of(endpoint).region}",
            rollup=self.rollup if self.settings.published else None,
            base_component=base_component,
            tiers=tiers or {},
            endpoint_name=endpoint.endpoint_name,
            variant_name=variant_name,
            alarms=list(self.endpoint_alarms.values()),
            top_n=self._dashboard_top_n,
        )
        return self.dashboard
