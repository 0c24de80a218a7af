"""Alarm descriptions point at a runbook URL the team gives, never at a path in this repository.

Whoever reads a firing alarm in the CloudWatch console or an SNS mail has no checkout of this
library: ``docs/monitoring.md`` means nothing there. With `MonitoringAlarms(runbook_url=...)` each
description ends with ``Runbook: <url>#<kind>``, and the monitoring guide has a section under each
of those anchors. Two small synths, about 2 s.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cdk_adapters.monitoring import AlarmThresholds, MonitoringAlarms
from cdk_adapters.monitoring.alarms import ALARM_KINDS, RUNBOOK_URL_MAX_LENGTH, _alarm_specs
from cdk_adapters.problems import ConfigurationError
from tests.monitoring.conftest import alarms_by_name, endpoint_with, template_of

RUNBOOK = "https://wiki.example.com/ml-platform/adapter-alarms"
EVERY_KIND = AlarmThresholds(throttled_share_percent=5, queue_wait_p95_ms=2000)
MONITORING_GUIDE = Path(__file__).resolve().parents[2] / "docs" / "monitoring.md"


def alarm_descriptions(runbook_url: str | None) -> dict[str, str]:
    endpoint = endpoint_with(alarms=MonitoringAlarms(endpoint=EVERY_KIND, adapters=EVERY_KIND, runbook_url=runbook_url))
    endpoint.add_adapter_alarms("support-en-v1")
    return {name: alarm["AlarmDescription"] for name, alarm in alarms_by_name(template_of(endpoint)).items()}


def test_every_alarm_ends_with_the_runbook_anchor_of_its_own_kind():
    descriptions = alarm_descriptions(RUNBOOK)
    assert len(descriptions) == 10, "five kinds on the endpoint and five on one adapter"
    for name, description in descriptions.items():
        kind = name.rsplit("/", 1)[1]
        assert description.endswith(f" Runbook: {RUNBOOK}#{kind}"), (name, description)


def test_no_alarm_names_a_file_of_this_repository():
    for runbook_url in (None, RUNBOOK):
        for name, description in alarm_descriptions(runbook_url).items():
            assert not re.search(r"\bdocs/|\.md\b", description), (name, description)
            assert ("Runbook:" in description) is (runbook_url is not None)


def test_the_monitoring_guide_has_a_section_under_every_anchor_an_alarm_links_to():
    anchors = set(re.findall(r'<a id="([a-z0-9-]+)"></a>', MONITORING_GUIDE.read_text()))
    kinds = {kind.replace("_", "-") for kind in ALARM_KINDS}
    assert kinds <= anchors, sorted(kinds - anchors)


def test_the_longest_description_with_the_longest_url_fits_cloudwatch():
    longest_what = "adapter " + "a" * 63 + " on endpoint " + "e" * 63
    url = "https://" + "u" * (RUNBOOK_URL_MAX_LENGTH - len("https://"))
    specs = _alarm_specs(_NoMetrics(), EVERY_KIND, longest_what)
    for kind, (_, _, _, description) in specs.items():
        assert len(f"{description} Runbook: {url}#{kind.replace('_', '-')}") <= 1024, kind


class _NoMetrics:
    """The descriptions only: no metric is built (each spec's metric is a lambda, not called)."""


@pytest.mark.parametrize(
    ("runbook_url", "message"),
    [
        ("wiki.example.com/alarms", "must be an http(s) URL without spaces"),
        ("https://wiki.example.com/my alarms", "must be an http(s) URL without spaces"),
        ("https://wiki.example.com/alarms#top", "must not have a fragment"),
        ("https://" + "u" * RUNBOOK_URL_MAX_LENGTH, f"at most {RUNBOOK_URL_MAX_LENGTH}"),
        (42, "must be an http(s) URL without spaces, got 42"),
    ],
)
def test_a_bad_runbook_url_is_refused_naming_the_field(runbook_url, message):
    with pytest.raises(ConfigurationError) as caught:
        endpoint_with(alarms=MonitoringAlarms(runbook_url=runbook_url))
    [problem] = caught.value.problems
    assert problem.field == "alarms.runbook_url" and message in problem.message
