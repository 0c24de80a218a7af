"""A manifest row acknowledges one gate rule with a reason (cdk-nag's model), and names clash ignoring case."""

from __future__ import annotations

import warnings

import pytest

from cdk_adapters.manifest import check_manifest, load_manifest, plan_manifest_file
from cdk_adapters.manifest.loader import ManifestDeprecationWarning
from cdk_adapters.problems import ConfigurationError
from tests.manifest.builders import write_manifest

REASON = "style adapter adapts the MLP only; latency measured equal"


def rows(zoo) -> list[dict]:
    return [
        {"name": "triage-v1", "source": str(zoo.adapter("good"))},
        {"name": "billing-v1", "source": str(zoo.adapter("good-2"))},
        {"name": "style-v1", "source": str(zoo.adapter("mlp"))},
    ]


def test_an_acknowledged_finding_is_kept_apart_with_its_reason(zoo, tmp_path):
    listed = rows(zoo)
    listed[2]["acknowledge"] = {"rule": "identical-target-modules", "reason": REASON}
    problems, plan = check_manifest(load_manifest(write_manifest(tmp_path, listed)))
    assert problems == []
    (finding,) = plan.acknowledged
    assert (finding.problem.subject, finding.problem.field, finding.reason) == ("adapter 'style-v1'", "target_modules", REASON)
    assert str(finding).endswith(f"[identical-target-modules] (acknowledged: {REASON})")


def test_an_acknowledgment_covers_only_its_rule(zoo, tmp_path):
    listed = rows(zoo)
    listed[2] = {**listed[2], "name": "style", "acknowledge": {"rule": "identical-target-modules", "reason": REASON}}
    problems, _ = check_manifest(load_manifest(write_manifest(tmp_path, listed)))
    assert [(p.subject, p.rule) for p in problems] == [("adapter 'style'", "version-suffix")]


def test_the_deprecated_reason_field_is_still_read_with_a_warning(zoo, tmp_path):
    listed = rows(zoo)
    listed[2]["target_modules_differ_reason"] = REASON
    path = write_manifest(tmp_path, listed)
    with pytest.warns(ManifestDeprecationWarning, match="target_modules_differ_reason: is deprecated") as caught:
        loaded = load_manifest(path)
    assert "acknowledge: {rule: identical-target-modules, reason: " in str(caught[0].message)
    assert [(p.subject, p.field) for p in loaded.deprecations] == [("adapter 'style-v1'", "target_modules_differ_reason")]
    problems, plan = check_manifest(loaded)
    assert problems == [] and [f.reason for f in plan.acknowledged] == [REASON]


@pytest.mark.parametrize(
    ("acknowledge", "field", "says"),
    [
        ({"rule": "rank-limits", "reason": REASON}, "acknowledge.rule", "'rank-limits' is not a rule of the gate"),
        ({"rule": "dora", "reason": REASON}, "acknowledge.rule", "'dora' cannot be acknowledged"),
        ({"rule": "identical-target-modules"}, "acknowledge.reason", "must say why the rule does not apply"),
        ({"rule": "identical-target-modules", "reason": "ok"}, "acknowledge.reason", "at least 10 characters"),
        ({"reason": REASON}, "acknowledge.rule", "Field required"),
        ({"rule": "version-suffix", "reason": REASON, "until": "v2"}, "acknowledge.until", "is not a known field"),
    ],
)
def test_a_bad_acknowledgment_is_refused_naming_the_adapter_and_field(zoo, tmp_path, acknowledge, field, says):
    listed = rows(zoo)
    listed[2]["acknowledge"] = acknowledge
    with pytest.raises(ConfigurationError) as caught:
        plan_manifest_file(write_manifest(tmp_path, listed))
    found = [p for p in caught.value.problems if p.subject == "adapter 'style-v1'" and p.field == field]
    assert found and says in found[0].message, caught.value.problems


def test_acknowledge_and_the_deprecated_field_together_are_refused(zoo, tmp_path):
    listed = rows(zoo)
    listed[2].update(acknowledge={"rule": "identical-target-modules", "reason": REASON}, target_modules_differ_reason=REASON)
    with warnings.catch_warnings(), pytest.raises(ConfigurationError) as caught:
        warnings.simplefilter("ignore", ManifestDeprecationWarning)
        load_manifest(write_manifest(tmp_path, listed))
    assert [(p.subject, p.field) for p in caught.value.problems] == [("adapter 'style-v1'", "(row)")]
    assert "not both" in caught.value.problems[0].message


def test_names_that_differ_only_in_case_fail_the_manifest_gate(zoo, tmp_path):
    listed = [
        {"name": "SupportEN-v1", "source": str(zoo.adapter("good"))},
        {"name": "supporten-v1", "source": str(zoo.adapter("good-2"))},
    ]
    problems, plan = check_manifest(load_manifest(write_manifest(tmp_path, listed)))
    assert plan is None
    assert [(p.subject, p.field, p.rule) for p in problems] == [("adapter 'SupportEN-v1'", "name", "unique-names")]
    assert "ignoring case" in problems[0].message
