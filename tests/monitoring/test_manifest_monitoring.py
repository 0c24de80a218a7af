"""Manifest rows: ``alarms:`` (true, or overrides) and ``canary: true``, through the gate and the wiring."""

from __future__ import annotations

import aws_cdk as cdk
import pytest

from cdk_adapters.manifest import endpoint_from_manifest, plan_manifest_file
from cdk_adapters.manifest.lock import LockFile, lock_path_for, write_lock
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import DIGEST_IMAGE
from tests.fleet.builders import write_fleet_manifest, adapter_name
from tests.monitoring.conftest import alarms_by_name, template_of

import yaml


def manifest_with(tmp_path, rows: dict[int, dict]):
    """The fleet builder's published rows (real gate, no files), with extra keys on some rows."""
    path = write_fleet_manifest(tmp_path, range(3))
    document = yaml.safe_load(path.read_text())
    for index, extra in rows.items():
        document["adapters"][index].update(extra)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def build(path, **props):
    from cdk_adapters.container_image import ContainerImage
    from cdk_adapters.fleet import FleetPlacement
    from cdk_adapters.inference_component import ComputeRequirements

    stack = cdk.Stack(cdk.App(), "Manifest-Alarms")
    return endpoint_from_manifest(
        stack, "Serving", manifest=path, image=ContainerImage.from_digest_uri(DIGEST_IMAGE),
        compute=ComputeRequirements(min_memory_required_in_mb=16384), placement=FleetPlacement.in_endpoint_stack(), **props,
    )


def test_rows_opt_in_with_defaults_or_overrides(tmp_path):
    path = manifest_with(tmp_path, {0: {"alarms": True}, 1: {"alarms": {"latency_p95_ms": 9000, "cold_start_share_percent": None, "period_minutes": 1}}})
    plan = plan_manifest_file(path)
    assert plan.alarm_overrides == {
        adapter_name(0): {},
        adapter_name(1): {"latency_p95_ms": 9000, "cold_start_share_percent": None, "period": 1},
    }
    endpoint = build(path)
    alarms = alarms_by_name(template_of(endpoint))
    first, second = (endpoint.adapters[adapter_name(i)].inference_component_name for i in (0, 1))
    assert {name for name in alarms if name.startswith(first + "/")} == {f"{first}/error-rate", f"{first}/latency-p95", f"{first}/cold-start-share"}
    assert {name for name in alarms if name.startswith(second + "/")} == {f"{second}/error-rate", f"{second}/latency-p95"}
    assert alarms[f"{second}/latency-p95"]["Threshold"] == 9000 and alarms[f"{second}/latency-p95"]["Period"] == 60
    assert not any(name.startswith(endpoint.adapters[adapter_name(2)].inference_component_name + "/") for name in alarms)
    # Rows opting in gave the endpoint the default alarm settings, endpoint alarms included.
    assert f"{endpoint.prefix}/error-rate" in alarms


def test_bad_alarm_rows_are_refused_naming_the_adapter_and_field(tmp_path):
    path = manifest_with(tmp_path, {
        0: {"alarms": {"latency_p99_ms": 100}},
        1: {"alarms": {"error_rate_percent": 120}},
        2: {"alarms": "yes please"},
    })
    with pytest.raises(ConfigurationError) as raised:
        plan_manifest_file(path)
    text = str(raised.value)
    assert "(3 problem(s))" in text
    assert f"adapter '{adapter_name(0)}': alarms.latency_p99_ms: is not a known field" in text
    assert f"adapter '{adapter_name(1)}': alarms.error_rate_percent: Input should be less than 100" in text
    assert f"adapter '{adapter_name(2)}': alarms: must be true, false or a mapping of overrides" in text
    nulled = manifest_with(tmp_path / "nulled", {0: {"alarms": {"period_minutes": None}}})
    with pytest.raises(ConfigurationError, match=r"period_minutes cannot be null \(only the three thresholds can be turned off\)"):
        plan_manifest_file(nulled)


def test_canary_rows_make_the_canary_plan(tmp_path):
    path = manifest_with(tmp_path, {1: {"canary": True}})
    plan = plan_manifest_file(path)
    assert plan.canary_adapters == (adapter_name(1),)
    canary = plan.canary_plan()
    assert [adapter.name for adapter in canary.adapters] == [adapter_name(1)]
    assert canary.manifest.aliases == {}
    without = plan_manifest_file(manifest_with(tmp_path / "none", {}))
    with pytest.raises(ConfigurationError, match="marks no row 'canary: true'"):
        without.canary_plan()
