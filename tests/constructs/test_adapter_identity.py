"""One adapter identity between the construct and the container, whichever name SageMaker sends.

The construct renders the component prefix into the container's environment; the container, given
that environment (decoded by its own settings reader), keys the limits and capture rendered under
an adapter's name by the component name and by the adapter name alike; and the construct's
request metrics (alarms, dashboard) query the ``Adapter`` dimension the container writes: that key.
"""

from __future__ import annotations

from aws_cdk import Stack

from adapter_server.settings import ServingSettings
from cdk_adapters import AdapterLimits
from cdk_adapters.contract import adapter_identity
from cdk_adapters.contract.adapter_names import adapter_component_name
from cdk_adapters.contract.capture_record import CaptureSettings
from cdk_adapters.contract.request_metrics import ADAPTER_DIMENSION
from tests.constructs.conftest import build_endpoint, new_stack
from tests.constructs.test_adapter_limits import model_environment, published


def test_a_component_name_and_an_adapter_name_reach_the_same_limits_and_capture():
    stack = new_stack()
    endpoint = build_endpoint(stack)
    endpoint.add_adapter(
        "Acme-v1", artifact=published("acme-v1"), limits=AdapterLimits(max_n=2), capture=CaptureSettings(redact=("prompt",))
    )
    endpoint.add_adapter("other-v1", artifact=published("other-v1"))
    environment = model_environment(stack)
    assert environment[adapter_identity.COMPONENT_PREFIX_ENV] == endpoint.component_prefix
    settings, problems = ServingSettings.from_environ(environment)
    assert problems == []
    component = adapter_component_name(endpoint.component_prefix, "Acme-v1")
    for given in (component, component.upper(), "acme-v1", "ACME-v1"):
        key = settings.adapter_key(given)
        assert key == "acme-v1", given
        assert settings.tenant_limits.for_adapter(key) == AdapterLimits(max_n=2)
        assert settings.capture.for_adapter(key) == CaptureSettings(redact=("prompt",))
    assert (
        settings.tenant_limits.for_adapter(settings.adapter_key(adapter_component_name(endpoint.component_prefix, "other-v1")))
        == AdapterLimits()
    )


def test_request_metrics_query_the_adapter_key_the_container_writes():
    stack = new_stack()
    endpoint = build_endpoint(stack)
    component = endpoint.add_adapter("Acme-v1", artifact=published("acme-v1"))
    metric = component.metric_request_latency()
    assert metric.dimensions[ADAPTER_DIMENSION] == "acme-v1"
    assert Stack.of(endpoint).resolve(metric.dimensions)[ADAPTER_DIMENSION] == "acme-v1"


def test_adapter_key_strips_only_this_endpoints_prefix():
    assert adapter_identity.adapter_key("adapters-dev-69212e86-support-v1", "adapters-dev-69212e86") == "support-v1"
    assert adapter_identity.adapter_key("Support-V1", "adapters-dev-69212e86") == "support-v1"
    assert (
        adapter_identity.adapter_key("adapters-prod-11111111-support-v1", "adapters-dev-69212e86")
        == "adapters-prod-11111111-support-v1"
    )
    assert adapter_identity.adapter_key("adapters-dev-69212e86-", "adapters-dev-69212e86") == "adapters-dev-69212e86-"
    assert adapter_identity.adapter_key("adapters-dev-69212e86-support-v1", None) == "adapters-dev-69212e86-support-v1"
