"""The example app's prod environment with its canary (``-c canary=true``): one synth shared by the
module, checked by the real cfn-lint (every template, nested shards included) and the three nag packs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

import app as example_app
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import VENV_BIN, app_context
from tests.constructs.test_nag_lint_composition import nag_violations
from tests.monitoring.conftest import alarms_by_name, resources

COMPARED = (
    "Namespace",
    "MetricName",
    "Statistic",
    "ExtendedStatistic",
    "Threshold",
    "Period",
    "EvaluationPeriods",
    "DatapointsToAlarm",
    "ComparisonOperator",
    "TreatMissingData",
)


@pytest.fixture(scope="module")
def prod_with_canary(tmp_path_factory):
    outdir = tmp_path_factory.mktemp("prod-canary")
    context = {**app_context("prod"), "canary": "true"}
    app = cdk.App(outdir=str(outdir), context=context)
    stack = example_app.build(app)
    assembly = app.synth()  # runs the app's nag packs too: a finding would raise here
    return {"app": app, "stack": stack, "outdir": Path(assembly.directory)}


def all_templates(stack: cdk.Stack) -> dict[str, dict]:
    """The stack's template and its nested shards', by path."""
    found = {stack.node.path: Template.from_stack(stack).to_json()}
    for shard in stack.endpoint.fleet.shards.values():
        found[shard.node.path] = Template.from_stack(shard).to_json()
    return found


def comparable(alarm: dict) -> dict:
    return {key: alarm.get(key) for key in COMPARED}


def test_prod_rolls_the_base_component_back_on_its_error_alarm(prod_with_canary):
    stack = prod_with_canary["stack"]
    template = Template.from_stack(stack).to_json()
    (base,) = [
        ic["Properties"]
        for ic in resources(template, "AWS::SageMaker::InferenceComponent").values()
        if "VariantName" in ic["Properties"]
    ]
    error_alarm = next(
        key
        for key, alarm in resources(template, "AWS::CloudWatch::Alarm").items()
        if alarm["Properties"]["AlarmName"] == f"{stack.endpoint.prefix}/error-rate"
    )
    assert base["DeploymentConfig"] == {
        "RollingUpdatePolicy": {
            "MaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
            "WaitIntervalInSeconds": 600,
            "MaximumExecutionTimeoutInSeconds": 7200,
        },
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": {"Ref": error_alarm}}]},
    }
    assert alarms_by_name(template)[f"{stack.endpoint.prefix}/error-rate"]["Threshold"] == 0.02


def test_the_canary_serves_the_canary_rows_with_alarms_matching_prod(prod_with_canary):
    stack, canary = prod_with_canary["stack"], prod_with_canary["stack"].canary
    assert list(canary.endpoint.adapters) == ["support-en-v1"]
    main_alarms = {name: alarm for t in all_templates(stack).values() for name, alarm in alarms_by_name(t).items()}
    canary_alarms = {name: alarm for t in all_templates(canary).values() for name, alarm in alarms_by_name(t).items()}

    def by_role(alarms: dict, endpoint) -> dict:
        adapter = endpoint.adapters["support-en-v1"].inference_component_name
        return {
            name.replace(adapter, "<adapter>").replace(endpoint.prefix, "<endpoint>"): comparable(alarm)
            for name, alarm in alarms.items()
            if name.startswith((adapter + "/", endpoint.prefix + "/"))
        }

    main_roles = by_role(main_alarms, stack.endpoint)
    canary_roles = by_role(canary_alarms, canary.endpoint)
    assert canary_roles == {key: value for key, value in main_roles.items() if key in canary_roles}
    assert set(canary_roles) == {
        f"<{who}>/{kind}" for who in ("endpoint", "adapter") for kind in ("error-rate", "latency-p95", "cold-start-share")
    }
    (base,) = [
        ic
        for ic in resources(Template.from_stack(canary).to_json(), "AWS::SageMaker::InferenceComponent").values()
        if "VariantName" in ic["Properties"]
    ]
    assert "DeploymentConfig" not in base["Properties"], "the canary is where an upgrade is tried: no rollout guard of its own"


def test_the_prod_record_names_the_canary(prod_with_canary):
    stack = prod_with_canary["stack"]
    (parameter,) = Template.from_stack(stack).find_resources("AWS::SSM::Parameter").values()
    record = DiscoveryRecord.from_json(parameter["Properties"]["Value"])
    assert record.canary is not None
    assert (record.canary.endpoint_name, record.canary.adapters, record.canary.traffic_percent) == (
        stack.canary.endpoint.endpoint_name,
        ("support-en-v1",),
        5,
    )


def test_cfn_lint_finds_no_error_and_the_nag_packs_nothing_unacknowledged(prod_with_canary):
    stack = prod_with_canary["stack"]
    assert nag_violations(stack) == [] and nag_violations(stack.canary) == []
    templates = sorted(prod_with_canary["outdir"].glob("*.template.json"))
    assert len(templates) > 2, "main, canary and nested shard templates"
    result = subprocess.run([str(VENV_BIN / "cfn-lint"), *map(str, templates)], capture_output=True, text=True, timeout=600)
    assert result.returncode & 2 == 0, result.stdout + result.stderr


def build_with(environment: str, **changes) -> str:
    context = app_context(environment)
    settings = json.loads(json.dumps(context["environments"][environment]))
    for key, value in changes.items():
        if value is None:
            settings.pop(key, None)
        else:
            settings[key] = value
    context["environments"][environment] = settings
    context["canary"] = "true"
    with pytest.raises(ConfigurationError) as raised:
        example_app.build(cdk.App(context=context))
    return str(raised.value)


def test_bad_monitoring_blocks_in_cdk_json_are_named_by_their_path():
    text = build_with("prod", deployment={"wait_interval": 60}, alarms={"endpoint": {"error_rate": 2}}, canary=None)
    assert "cdk.json: context.environments.prod.deployment: unknown keys wait_interval" in text
    assert "cdk.json: context.environments.prod.alarms:" in text and "error_rate" in text
    assert "cdk.json: context.environments.prod.canary: is required for -c canary=true" in text
    odd = build_with("prod", canary={"stack_name": "X-canary", "traffic_percent": 5, "deployment": {}})
    assert "cdk.json: context.environments.prod.canary.deployment: is not a canary setting" in odd
