"""Per-adapter monitoring built on the container's request metrics (`cdk_adapters.contract.request_metrics`).

* `request_metrics` - the endpoint's metric settings and typed ``metric_*`` methods per adapter and
  for the endpoint rollup;
* `alarms` - error-rate, p95-latency and cold-start-share alarms (and, opt-in, throttled-share and
  p95-queue-wait alarms), per endpoint and per adapter, with optional SNS actions;
* `dashboard` - one dashboard per endpoint whose size does not depend on the adapter count;
* `endpoint_monitoring` - the wiring of all three onto one `MultiAdapterEndpoint`.
"""

from cdk_adapters.monitoring.alarms import (
    ALARM_KINDS,
    COLD_START_SHARE,
    ERROR_RATE,
    LATENCY_P95,
    QUEUE_WAIT_P95,
    THROTTLED_SHARE,
    AlarmThresholds,
    MonitoringAlarms,
)
from cdk_adapters.monitoring.dashboard import EndpointDashboard, dashboard_limit_problems, top_adapters_query
from cdk_adapters.monitoring.request_metrics import RequestMetricMethods, RequestMetrics, RequestMetricSource

__all__ = [
    "ALARM_KINDS",
    "COLD_START_SHARE",
    "ERROR_RATE",
    "LATENCY_P95",
    "QUEUE_WAIT_P95",
    "THROTTLED_SHARE",
    "AlarmThresholds",
    "EndpointDashboard",
    "MonitoringAlarms",
    "RequestMetricMethods",
    "RequestMetricSource",
    "RequestMetrics",
    "dashboard_limit_problems",
    "top_adapters_query",
]
