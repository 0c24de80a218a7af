"""Fair share and per-adapter limits on the construct: rendered through the one contract the
container decodes, refused at synth with every problem named, and absent when unused."""

from __future__ import annotations

import json
import re

import pytest
from aws_cdk.assertions import Template

from adapter_server.settings import ServingSettings
from cdk_adapters import AdapterLimits
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.contract import tenant_limits
from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import ADAPTER_BUCKET_URL, build_endpoint, model_environment, new_stack


def published(name: str) -> AdapterArtifact:
    return AdapterArtifact.from_s3_url(f"{ADAPTER_BUCKET_URL}{name}/adapter.tar.gz")


def test_no_limits_render_nothing_and_fair_share_is_on_by_default():
    stack = new_stack()
    endpoint = build_endpoint(stack)
    endpoint.add_adapter("support-v1", artifact=published("support-v1"))
    environment = model_environment(stack)
    assert not any(key in environment for key in (tenant_limits.LIMITS_ENV, tenant_limits.FAIR_SHARE_ENV))
    settings, problems = ServingSettings.from_environ(environment)
    assert problems == [] and settings.tenant_limits.fair_share


def test_endpoint_defaults_and_an_adapters_own_limits_reach_the_container():
    stack = new_stack()
    endpoint = build_endpoint(stack, adapter_limits=AdapterLimits(max_queue=32), vllm=VllmOptions(max_num_seqs=16))
    endpoint.add_adapter(
        "bulk-v1", artifact=published("bulk-v1"), limits=AdapterLimits(weight=0.5, max_in_flight=4, max_queue_wait_s=5)
    )
    endpoint.add_adapter("Priority-v1", artifact=published("priority-v1"), limits=AdapterLimits(weight=3))
    endpoint.add_adapter("other-v1", artifact=published("other-v1"))
    environment = model_environment(stack)
    assert json.loads(environment[tenant_limits.LIMITS_ENV]) == {
        "default": {"max_queue": 32},
        "adapters": {"bulk-v1": {"weight": 0.5, "max_in_flight": 4, "max_queue_wait_s": 5}, "priority-v1": {"weight": 3}},
    }
    assert environment["CDK_ADAPTERS_VLLM_MAX_NUM_SEQS"] == "16"
    # The container reads back exactly what was declared, by the one name rule (case-insensitive).
    settings, problems = ServingSettings.from_environ(environment)
    assert problems == []
    limits = settings.tenant_limits
    assert limits.for_adapter("PRIORITY-v1") == AdapterLimits(weight=3)
    assert limits.for_adapter("bulk-v1") == AdapterLimits(weight=0.5, max_in_flight=4, max_queue_wait_s=5)
    assert limits.for_adapter("other-v1") == AdapterLimits(max_queue=32)


def test_fair_share_can_be_turned_off():
    stack = new_stack()
    build_endpoint(stack, fair_share=False)
    environment = model_environment(stack)
    assert environment[tenant_limits.FAIR_SHARE_ENV] == "false"
    settings, _ = ServingSettings.from_environ(environment)
    assert settings.tenant_limits.fair_share is False


def test_bad_limits_are_refused_all_at_once_naming_adapter_and_field():
    stack = new_stack()
    endpoint = build_endpoint(stack, vllm=VllmOptions(max_num_seqs=8))
    with pytest.raises(ConfigurationError) as raised:
        endpoint.add_adapter(
            "bulk-v1",
            artifact=published("bulk-v1"),
            limits=AdapterLimits(weight=0, max_in_flight=12, max_queue=-1, max_queue_wait_s=90),
        )
    found = {(p.field, p.message.split(",")[0]) for p in raised.value.problems}
    assert {field for field, _ in found} == {
        "limits.weight",
        "limits.max_in_flight",
        "limits.max_queue",
        "limits.max_queue_wait_s",
    }
    assert all("adapter 'bulk-v1'" in p.subject for p in raised.value.problems)
    assert any("cannot hold: the engine runs at most vllm.max_num_seqs=8" in p.message for p in raised.value.problems)
    assert endpoint.adapters == {}  # nothing was added
    with pytest.raises(ConfigurationError) as raised:
        build_endpoint(new_stack(), adapter_limits=AdapterLimits(weight=500))
    assert [p.field for p in raised.value.problems] == ["adapter_limits.weight"]


def test_limits_that_outgrow_one_environment_value_fail_synth_with_the_fix():
    stack = new_stack()
    endpoint = build_endpoint(stack)
    for index in range(40):
        name = f"tenant-{index:02d}-v1"
        endpoint.add_adapter(name, artifact=published(name), limits=AdapterLimits(weight=2, max_queue=10))
    with pytest.raises(
        RuntimeError, match=re.escape("SageMaker allows 1024 per variable. Set common limits once with adapter_limits=")
    ):
        Template.from_stack(stack)
