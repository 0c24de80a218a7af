"""Autoscaled copies survive routine deploys, proven with the real CDK CLI's diff (nested shards included).

The base component's ``RuntimeConfig.CopyCount`` is write-only: a stack update that touches the
component may re-send it and reset a count autoscaling changed. So routine changes must not touch
it: adding or removing an adapter changes one shard (and, in the parent, that shard's
TemplateURL), retuning scaling and changing alarms (the wake-up, and the endpoint alarms its
rolling update rolls back on) changes only those resources, and a change that must update
the component (its compute, here) leaves CopyCount out of the diff because the template keeps it
constant.

Six in-process syntheses of a 10-adapter endpoint (about 3 s each) and seven CLI diffs (3-6 s each).
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest

from cdk_adapters import BaseCopies, Instances
from cdk_adapters.endpoint.components import ComputeRequirements
from cdk_adapters.endpoint.fleet import FleetPlacement
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.hosting.rolling_update import RollingUpdate
from cdk_adapters.hosting.scaling import WakeUpScope
from cdk_adapters.manifest import endpoint_from_manifest
from cdk_adapters.monitoring import AlarmThresholds, MonitoringAlarms
from tests.constructs.conftest import DIGEST_IMAGE
from tests.fleet.builders import adapter_name, write_fleet_manifest
from tests.support.cdk_diff import NESTED_SUFFIX, diff_assemblies

pytestmark = pytest.mark.cdk_cli

STACK = "Scaling-Deploys"
ADAPTERS = 10
REMOVED = 4


def synth(
    root: Path,
    label: str,
    indices,
    *,
    target: float = 4,
    wake_up_minutes: int = 10,
    scope: WakeUpScope = WakeUpScope.ANY_COMPONENT_IN_REGION,
    error_rate_percent: float = 5,
    memory: int = 16384,
) -> Path:
    """A scale-to-zero endpoint serving `indices` (two copies at creation, rolled one at a time and
    rolled back on the endpoint's error-rate alarm) as a cloud assembly with the CLI's metadata."""
    manifest = write_fleet_manifest(root / label, indices)
    outdir = root / f"{label}.out"
    app = cdk.App(outdir=str(outdir), context={"aws:cdk:enable-asset-metadata": True, "aws:cdk:enable-path-metadata": True})
    endpoint = endpoint_from_manifest(
        cdk.Stack(app, STACK),
        "Serving",
        manifest=manifest,
        image=ContainerImage.from_digest_uri(DIGEST_IMAGE),
        compute=ComputeRequirements(min_memory_required_in_mb=memory),
        alarms=MonitoringAlarms(endpoint=AlarmThresholds(error_rate_percent=error_rate_percent)),
        deployment=RollingUpdate(rollback_on_endpoint_alarms=("error_rate",)),
        instances=Instances(instance_type="ml.g6.12xlarge", min_count=0, max_count=2),
        base_copies=BaseCopies(count=2),
    )
    copies = endpoint.base_component.auto_scale_copy_count(min_copies=0, max_copies=8)
    copies.scale_on_concurrent_requests(target)
    copies.scale_to_zero(wake_up_cooldown=cdk.Duration.minutes(wake_up_minutes), scope=scope)
    app.synth()
    return outdir


@pytest.fixture(scope="module")
def assemblies(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("deploys")
    every = range(ADAPTERS)
    return {
        "deployed": synth(root, "deployed", every),
        "plus_one": synth(root, "plus-one", range(ADAPTERS + 1)),
        "minus_one": synth(root, "minus-one", [i for i in every if i != REMOVED]),
        "retuned": synth(root, "retuned", every, target=6, wake_up_minutes=5),
        "new_alarms": synth(root, "new-alarms", every, scope=WakeUpScope.BASE_COMPONENT, error_rate_percent=2),
        "new_compute": synth(root, "new-compute", every, memory=20480),
    }


def base_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if "AWS::SageMaker::InferenceComponent" in line and "BaseComponent" in line]


@pytest.mark.parametrize(
    ("label", "adapter", "sign"), [("plus_one", adapter_name(ADAPTERS), "+"), ("minus_one", adapter_name(REMOVED), "-")]
)
def test_adding_or_removing_an_adapter_changes_one_shard_and_never_the_base(assemblies, tmp_path, label, adapter, sign):
    diff = diff_assemblies(assemblies["deployed"], assemblies[label], STACK, tmp_path)
    nested = {name: lines for name, lines in diff.changed.items() if name.endswith(NESTED_SUFFIX)}
    [(shard_file, lines)] = nested.items()
    assert f"Shard{FleetPlacement().shard_of(adapter)}" in shard_file
    assert len(lines) == 1 and lines[0].startswith(f"[{sign}] AWS::SageMaker::InferenceComponent") and adapter in lines[0]
    [parent_line] = diff.changed[f"{STACK}.template.json"]
    assert parent_line.startswith("[~] AWS::CloudFormation::Stack") and parent_line.endswith("{TemplateURL}")
    assert base_lines(diff.lines()) == []


def test_retuning_scaling_changes_only_the_scaling_policies(assemblies, tmp_path):
    diff = diff_assemblies(assemblies["deployed"], assemblies["retuned"], STACK, tmp_path)
    assert list(diff.changed) == [f"{STACK}.template.json"], "no shard changes"
    lines = diff.changed[f"{STACK}.template.json"]
    assert len(lines) == 2 and all(line.startswith("[~] AWS::ApplicationAutoScaling::ScalingPolicy") for line in lines)
    assert {line.split(" {")[1] for line in lines} == {
        "TargetTrackingScalingPolicyConfiguration}",
        "StepScalingPolicyConfiguration}",
    }
    assert base_lines(lines) == []


def test_changing_the_alarms_changes_only_the_alarms(assemblies, tmp_path):
    """A new wake-up scope and a new threshold on the alarm the rolling update rolls back on: the
    base component names that alarm, by a name that does not change, so it is not touched."""
    diff = diff_assemblies(assemblies["deployed"], assemblies["new_alarms"], STACK, tmp_path)
    assert list(diff.changed) == [f"{STACK}.template.json"], "no shard changes"
    lines = diff.changed[f"{STACK}.template.json"]
    assert len(lines) == 2 and all(line.startswith("[~] AWS::CloudWatch::Alarm") for line in lines), lines
    assert any("WakeUpAlarm" in line for line in lines) and any("ErrorRate" in line for line in lines)
    assert base_lines(lines) == []


def test_a_change_that_must_update_the_base_leaves_its_copy_count_out(assemblies, tmp_path):
    """New compute updates the component in place; CopyCount is the same in both templates, so the
    update carries no copy-count change (whether SageMaker's handler re-sends it anyway is unconfirmed)."""
    diff = diff_assemblies(assemblies["deployed"], assemblies["new_compute"], STACK, tmp_path)
    [line] = base_lines(diff.lines())
    assert line.startswith("[~] AWS::SageMaker::InferenceComponent") and line.endswith("{Specification}")
    assert [other for other in diff.lines() if other != line] == [], "the scaling resources are untouched"
