"""The example app serves its manifest: what was only pinned by the snapshots, stated as assertions.

When app.py started reading manifests/example.yaml, the templates' adapter URLs, the container's base
model revision and the vLLM slot limits changed with it; when the manifest's rows opted into alarms,
per-adapter alarms appeared with thresholds from cdk.json and the row. These tests say which value
comes from where, for every environment in cdk.json.
"""

from __future__ import annotations

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template

import app as example_app
from cdk_adapters.contract import serving_env
from tests.constructs.conftest import REPO_ROOT, app_context, app_environments

MANIFEST = yaml.safe_load((REPO_ROOT / "manifests" / "example.yaml").read_text())


def templates(stack) -> list[dict]:
    """The stack's template and its nested shards'."""
    return [Template.from_stack(stack).to_json()] + [
        Template.from_stack(shard).to_json() for shard in stack.endpoint.fleet.shards.values()
    ]


@pytest.fixture(scope="module", params=sorted(app_environments()))
def environment(request):
    name = request.param
    return name, example_app.build(cdk.App(context=app_context(name)))


def test_every_manifest_row_is_an_adapter_component_serving_its_source(environment):
    _, stack = environment
    served = {
        resource["Properties"]["InferenceComponentName"]: resource["Properties"]["Specification"]["Container"]["ArtifactUrl"]
        for template in templates(stack)
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::SageMaker::InferenceComponent"
        and "BaseInferenceComponentName" in resource["Properties"].get("Specification", {})
    }
    assert served == {f"{stack.endpoint.prefix}-{row['name']}": row["source"] for row in MANIFEST["adapters"]}


def test_the_container_serves_the_manifests_base_model_and_slot_limits(environment):
    name, stack = environment
    (model,) = Template.from_stack(stack).find_resources("AWS::SageMaker::Model").values()
    env = model["Properties"]["PrimaryContainer"]["Environment"]
    serving = MANIFEST["serving"]
    assert (env[serving_env.BASE_MODEL_ID], env[serving_env.BASE_MODEL_REVISION]) == (
        MANIFEST["base_model"]["id"],
        MANIFEST["base_model"]["revision"],
    )
    assert env[serving_env.ALLOW_VISION_MODULES] == "false"  # the manifest's base is not vision-language
    flag = serving_env.VLLM_FLAG_PREFIX
    assert (env[flag + "MAX_LORAS"], env[flag + "MAX_CPU_LORAS"], env[flag + "MAX_LORA_RANK"]) == (
        str(serving["max_loras"]),
        str(serving["max_cpu_loras"]),
        str(serving["max_lora_rank"]),
    )
    # cdk.json's own vLLM settings still apply beside the manifest's.
    assert env[flag + "MAX_MODEL_LEN"] == str(app_environments()[name]["vllm"]["max_model_len"])


DEFAULTS = {"error_rate_percent": 5.0, "latency_p95_ms": 30_000.0, "cold_start_share_percent": 25.0}
"""AlarmThresholds' documented defaults, for an environment whose cdk.json has no alarms block."""


def thresholds(*layers: dict) -> dict[str, float]:
    merged = {k: v for layer in (DEFAULTS, *layers) for k, v in layer.items()}
    return {
        "error-rate": merged["error_rate_percent"] / 100,
        "latency-p95": merged["latency_p95_ms"],
        "cold-start-share": merged["cold_start_share_percent"] / 100,
    }


def test_alarms_follow_cdk_json_and_each_manifest_rows_overrides(environment):
    name, stack = environment
    # The request-metric alarms (named); the copy-scaling wake-up alarm is the scaling tests' subject.
    alarms = {
        resource["Properties"]["AlarmName"]: resource["Properties"]["Threshold"]
        for template in templates(stack)
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::CloudWatch::Alarm" and "AlarmName" in resource["Properties"]
    }
    block = app_environments()[name].get("alarms") or {}
    prefix = stack.endpoint.prefix
    expected = {f"{prefix}/{kind}": value for kind, value in thresholds(block.get("endpoint", {})).items()}
    for row in MANIFEST["adapters"]:
        if row.get("alarms"):
            override = row["alarms"] if isinstance(row["alarms"], dict) else {}
            component = f"{prefix}-{row['name']}"
            expected.update(
                {f"{component}/{kind}": value for kind, value in thresholds(block.get("adapters", {}), override).items()}
            )
    assert alarms == expected
