"""Per-adapter monitoring built on the container's request metrics (`cdk_adapters.contract.request_metrics`).

* `metric_source` - the endpoint's metric settings and typed ``metric_*`` methods per adapter and
  for the endpoint rollup;
* `alarms` - error-rate, p95-latency and cold-start-share alarms (and, opt-in, throttled-share and
  p95-queue-wait alarms), per endpoint and per adapter, with optional SNS actions;
* `dashboard` - one dashboard per endpoint whose size does not depend on the adapter count;
* `endpoint_monitoring` - the wiring of all three onto one `MultiAdapterEndpoint`;
* `thresholds` - the alarm settings' names and value rules (standard library only).

The names below are imported on first use, so that ``cdk_adapters.monitoring.thresholds`` can be
read (by the manifest schema) without starting the CDK's runtime.
"""

from __future__ import annotations

from cdk_adapters.private.lazy_exports import lazy_exports

_EXPORTS = {
    "ALARM_KINDS": "cdk_adapters.monitoring.alarms",
    "COLD_START_SHARE": "cdk_adapters.monitoring.alarms",
    "ERROR_RATE": "cdk_adapters.monitoring.alarms",
    "LATENCY_P95": "cdk_adapters.monitoring.alarms",
    "QUEUE_WAIT_P95": "cdk_adapters.monitoring.alarms",
    "THROTTLED_SHARE": "cdk_adapters.monitoring.alarms",
    "AlarmThresholds": "cdk_adapters.monitoring.alarms",
    "MonitoringAlarms": "cdk_adapters.monitoring.alarms",
    "EndpointDashboard": "cdk_adapters.monitoring.dashboard",
    "dashboard_limit_problems": "cdk_adapters.monitoring.dashboard",
    "top_adapters_query": "cdk_adapters.monitoring.dashboard",
    "RequestMetricMethods": "cdk_adapters.monitoring.metric_source",
    "RequestMetrics": "cdk_adapters.monitoring.metric_source",
    "RequestMetricSource": "cdk_adapters.monitoring.metric_source",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
