"""The manifest's ``aliases:`` section: stable names over versioned adapters, checked by the gate."""

from __future__ import annotations

import pytest
import yaml

from cdk_adapters.manifest import plan_manifest_file
from cdk_adapters.problems import ConfigurationError
from tests.manifest.builders import write_manifest


@pytest.fixture
def two_versions(zoo, tmp_path):
    """support-en-v1 and its successor v2, both local directories (same target modules)."""
    return write_manifest(
        tmp_path,
        [
            {"name": "support-en-v1", "source": str(zoo.adapter("good"))},
            {"name": "support-en-v2", "source": str(zoo.adapter("good-2"))},
        ],
    )


def with_aliases(path, aliases):
    document = yaml.safe_load(path.read_text())
    document["aliases"] = aliases
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_an_alias_names_one_version_or_weights_that_the_plan_publishes(two_versions):
    with_aliases(two_versions, {"support-en": "support-en-v1", "support-canary": {"support-en-v1": 90, "support-en-v2": 10}})
    plan = plan_manifest_file(two_versions)
    assert plan.aliases == {
        "support-en": {"support-en-v1": 100},
        "support-canary": {"support-en-v1": 90, "support-en-v2": 10},
    }


def test_a_manifest_without_aliases_has_none(two_versions):
    assert plan_manifest_file(two_versions).aliases == {}


def test_every_bad_alias_is_reported_at_once_naming_alias_and_field(two_versions):
    with_aliases(
        two_versions,
        {
            "support-fr": "support-fr-v1",  # unknown target
            "support-en": {"support-en-v1": 90, "support-en-v2": 5},  # sums to 95
            "Support-EN-v2": "support-en-v1",  # shadows an adapter (names compare case-insensitively)
            "support-half": {"support-en-v1": "fifty", "support-en-v2": 50},  # not an integer
            "support-zero": {"support-en-v1": 100, "support-en-v2": 0},  # a zero weight is a typo, not a pause
        },
    )
    with pytest.raises(ConfigurationError) as raised:
        plan_manifest_file(two_versions)
    found = {(p.subject, p.field): p.message for p in raised.value.problems}
    assert set(found) == {
        ("alias 'support-fr'", "aliases.support-fr"),
        ("alias 'support-en'", "aliases.support-en"),
        ("alias 'Support-EN-v2'", "aliases.Support-EN-v2"),
        ("alias 'support-half'", "aliases.support-half"),
        ("alias 'support-zero'", "aliases.support-zero"),
    }
    assert "'support-fr-v1', which is not an adapter" in found[("alias 'support-fr'", "aliases.support-fr")]
    assert "sum to 100, got 95" in found[("alias 'support-en'", "aliases.support-en")]
    assert "shadows the adapter" in found[("alias 'Support-EN-v2'", "aliases.Support-EN-v2")]
    assert "integers from 1 to 100" in found[("alias 'support-half'", "aliases.support-half")]
    assert "integers from 1 to 100" in found[("alias 'support-zero'", "aliases.support-zero")]


def test_alias_problems_come_with_the_rows_problems(two_versions, tmp_path):
    document = yaml.safe_load(two_versions.read_text())
    document["adapters"].append({"name": "support-de-v1", "source": str(tmp_path / "missing")})
    document["aliases"] = {"support-en": {"support-en-v1": 50}}
    two_versions.write_text(yaml.safe_dump(document))
    with pytest.raises(ConfigurationError) as raised:
        plan_manifest_file(two_versions)
    assert {p.subject for p in raised.value.problems} == {"adapter 'support-de-v1'", "alias 'support-en'"}


def test_an_alias_that_is_not_a_name_or_a_mapping_is_a_schema_error(two_versions):
    with_aliases(two_versions, {"support-en": ["support-en-v1"]})
    with pytest.raises(ConfigurationError) as raised:
        plan_manifest_file(two_versions)
    assert all(p.field.startswith("aliases.support-en") for p in raised.value.problems)
