"""Manifest rows: ``alarms:`` (true, or overrides) and ``canary: true``, through the gate and the wiring."""

from __future__ import annotations

from dataclasses import fields

import aws_cdk as cdk
import pytest
import yaml

from cdk_adapters.manifest import endpoint_from_manifest, plan_manifest_file
from cdk_adapters.monitoring import thresholds
from cdk_adapters.monitoring.alarms import THRESHOLD_FIELDS, AlarmThresholds
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import DIGEST_IMAGE
from tests.fleet.builders import adapter_name, write_fleet_manifest
from tests.monitoring.conftest import alarms_by_name, template_of


def manifest_with(tmp_path, rows: dict[int, dict]):
    """The fleet builder's published rows (real gate, no files), with extra keys on some rows."""
    path = write_fleet_manifest(tmp_path, range(3))
    document = yaml.safe_load(path.read_text())
    for index, extra in rows.items():
        document["adapters"][index].update(extra)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def build(path, **props):
    from cdk_adapters.endpoint.components import ComputeRequirements
    from cdk_adapters.endpoint.fleet import FleetPlacement
    from cdk_adapters.hosting.container_image import ContainerImage

    stack = cdk.Stack(cdk.App(), "Manifest-Alarms")
    return endpoint_from_manifest(
        stack,
        "Serving",
        manifest=path,
        image=ContainerImage.from_digest_uri(DIGEST_IMAGE),
        compute=ComputeRequirements(min_memory_required_in_mb=16384),
        placement=FleetPlacement.in_endpoint_stack(),
        **props,
    )


def test_rows_opt_in_with_defaults_or_overrides(tmp_path):
    path = manifest_with(
        tmp_path,
        {0: {"alarms": True}, 1: {"alarms": {"latency_p95_ms": 9000, "cold_start_share_percent": None, "period_minutes": 1}}},
    )
    plan = plan_manifest_file(path)
    assert plan.alarm_overrides == {
        adapter_name(0): {},
        adapter_name(1): {"latency_p95_ms": 9000, "cold_start_share_percent": None, "period": 1},
    }
    endpoint = build(path)
    alarms = alarms_by_name(template_of(endpoint))
    first, second = (endpoint.adapters[adapter_name(i)].inference_component_name for i in (0, 1))
    assert {name for name in alarms if name.startswith(first + "/")} == {
        f"{first}/error-rate",
        f"{first}/latency-p95",
        f"{first}/cold-start-share",
    }
    assert {name for name in alarms if name.startswith(second + "/")} == {f"{second}/error-rate", f"{second}/latency-p95"}
    assert alarms[f"{second}/latency-p95"]["Threshold"] == 9000 and alarms[f"{second}/latency-p95"]["Period"] == 60
    assert not any(name.startswith(endpoint.adapters[adapter_name(2)].inference_component_name + "/") for name in alarms)
    # Rows opting in gave the endpoint the default alarm settings, endpoint alarms included.
    assert f"{endpoint.prefix}/error-rate" in alarms


def test_bad_alarm_rows_are_refused_naming_the_adapter_and_field(tmp_path):
    path = manifest_with(
        tmp_path,
        {
            0: {"alarms": {"latency_p99_ms": 100}},
            1: {"alarms": {"error_rate_percent": 120}},
            2: {"alarms": "yes please"},
        },
    )
    with pytest.raises(ConfigurationError) as raised:
        plan_manifest_file(path)
    text = str(raised.value)
    assert "(3 problem(s))" in text
    assert f"adapter '{adapter_name(0)}': alarms.latency_p99_ms: is not a known field" in text
    # The refusal lists what is known: every AlarmThresholds field (the period in minutes).
    known = text.split("alarms.latency_p99_ms: ")[1].split("known: ")[1].splitlines()[0]
    assert known.split(", ") == ["period_minutes" if name == "period" else name for name in THRESHOLD_FIELDS]
    assert f"adapter '{adapter_name(1)}': alarms.error_rate_percent: must be a percentage above 0 and below 100" in text
    assert f"adapter '{adapter_name(2)}': alarms: must be true, false or a mapping of overrides" in text
    nulled = manifest_with(
        tmp_path / "nulled", {0: {"alarms": {"period_minutes": None, "queue_wait_p95_ms": -5, "throttled_share_percent": 100}}}
    )
    with pytest.raises(ConfigurationError) as raised:
        plan_manifest_file(nulled)
    text = str(raised.value)
    assert "(3 problem(s))" in text
    assert "alarms.period_minutes: cannot be null (only the alarm thresholds can be turned off)" in text
    assert "alarms.queue_wait_p95_ms: must be a positive number of milliseconds (or None), got -5" in text
    assert "alarms.throttled_share_percent: must be a percentage above 0 and below 100" in text


def test_rows_take_every_alarm_threshold_field_including_the_fair_share_ones(tmp_path):
    path = manifest_with(
        tmp_path, {0: {"alarms": {"throttled_share_percent": 2, "queue_wait_p95_ms": 1500, "evaluation_periods": 4}}}
    )
    assert plan_manifest_file(path).alarm_overrides[adapter_name(0)] == {
        "throttled_share_percent": 2,
        "queue_wait_p95_ms": 1500,
        "evaluation_periods": 4,
    }
    endpoint = build(path)
    alarms = alarms_by_name(template_of(endpoint))
    component = endpoint.adapters[adapter_name(0)].inference_component_name
    mine = {name: alarm for name, alarm in alarms.items() if name.startswith(component + "/")}
    assert set(mine) == {
        f"{component}/{kind}" for kind in ("error-rate", "latency-p95", "cold-start-share", "throttled-share", "queue-wait-p95")
    }
    assert mine[f"{component}/throttled-share"]["Threshold"] == 0.02
    assert mine[f"{component}/throttled-share"]["MetricName"] == "Throttled"
    assert mine[f"{component}/queue-wait-p95"]["Threshold"] == 1500
    assert mine[f"{component}/queue-wait-p95"]["MetricName"] == "QueueWait"
    assert all(alarm["EvaluationPeriods"] == 4 for alarm in mine.values())


def test_the_manifest_and_the_construct_share_one_list_of_alarm_settings():
    assert tuple(field.name for field in fields(AlarmThresholds)) == THRESHOLD_FIELDS
    assert thresholds.THRESHOLD_FIELDS == THRESHOLD_FIELDS


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
