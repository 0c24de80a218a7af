"""The manifest file's schema: unknown keys and bad values are errors, all reported at once."""

from __future__ import annotations

import json

import pytest

from cdk_adapters.manifest import load_manifest, parse_manifest
from cdk_adapters.problems import ConfigurationError
from tests.manifest.builders import TINY_BASE, write_manifest


def problems_of(error: ConfigurationError) -> list[tuple[str, str]]:
    return [(p.subject, p.field) for p in error.problems]


def test_a_complete_manifest_parses(tmp_path):
    path = write_manifest(
        tmp_path,
        [
            {
                "name": "triage-v3",
                "source": "s3://bucket/adapters/triage-v3/adapter.tar.gz",
                "owner": "support",
                "tags": {"tenant": "acme"},
            },
            {"name": "billing-v1", "source": "./billing", "include_tokenizer": True},
        ],
        serving={"max_loras": 2, "max_cpu_loras": 8, "max_lora_rank": 16},
    )
    manifest = load_manifest(path).manifest
    assert manifest.base_model.id == TINY_BASE["id"]
    assert manifest.serving.max_cpu_loras == 8
    assert [row.is_s3 for row in manifest.adapters] == [True, False]
    assert manifest.adapters[0].tags == {"tenant": "acme"}


def test_defaults(tmp_path):
    manifest = load_manifest(write_manifest(tmp_path, [])).manifest
    assert (manifest.serving.max_loras, manifest.serving.max_cpu_loras, manifest.serving.max_lora_rank) == (4, None, None)


def test_unknown_keys_are_errors_everywhere_and_name_the_adapter(tmp_path):
    text = (
        write_manifest(tmp_path, [{"name": "triage-v1", "source": "./a", "ownr": "x"}]).read_text() + "servng:\n  max_loras: 2\n"
    ).replace("hidden_size:", "hiden_size: 64\n  hidden_size:")
    with pytest.raises(ConfigurationError) as caught:
        parse_manifest(text)
    assert set(problems_of(caught.value)) == {
        ("manifest", "servng"),
        ("manifest", "base_model.hiden_size"),
        ("adapter 'triage-v1'", "ownr"),
    }
    assert all("is not a known field" in p.message for p in caught.value.problems)


def test_bad_values_are_all_reported(tmp_path):
    path = write_manifest(
        tmp_path,
        [
            {"name": "triage-v1", "source": "https://example.com/a.tar.gz"},
            {"name": "billing-v1", "source": "s3://bucket/adapters/billing-v1/"},
            {"name": "legal-v1", "source": "s3://bucket/legal.tar.gz", "include_tokenizer": True},
        ],
        serving={"max_loras": 4, "max_cpu_loras": 2, "max_lora_rank": 24},
        base={"artifact": "s3://models/llama", "hidden_size": 0},
    )
    with pytest.raises(ConfigurationError) as caught:
        load_manifest(path)
    found = {(p.subject, p.field): p.message for p in caught.value.problems}
    subject = f"manifest '{path}'"
    assert "must end with '/'" in found[(subject, "base_model.artifact")]
    assert (subject, "base_model.hidden_size") in found
    assert "vLLM accepts only 1, 8, 16, 32, 64, 128, 256, 320, 512" in found[(subject, "serving.max_lora_rank")]
    assert "must be s3://<bucket>/<key>.tar.gz or a local directory path" in found[("adapter 'triage-v1'", "source")]
    assert "an S3 source must be s3://<bucket>/<key>.tar.gz" in found[("adapter 'billing-v1'", "source")]
    assert "include_tokenizer applies to local sources only" in found[("adapter 'legal-v1'", "(row)")]


def test_s3_urls_are_read_by_the_one_parser_and_say_what_is_wrong(tmp_path):
    path = write_manifest(
        tmp_path,
        [
            {"name": "triage-v1", "source": "s3://Adapters_Bucket/triage-v1/adapter.tar.gz"},
            {"name": "billing-v1", "source": "s3://adapters/billing v1/adapter.tar.gz"},
            {"name": "legal-v1", "source": "s3://adapters"},
        ],
        base={"artifact": "s3://mo/llama/"},
    )
    with pytest.raises(ConfigurationError) as caught:
        load_manifest(path)
    found = {(p.subject, p.field): p.message for p in caught.value.problems}
    assert "bucket 'Adapters_Bucket' may hold only lower-case letters" in found[("adapter 'triage-v1'", "source")]
    assert "the key contains white space" in found[("adapter 'billing-v1'", "source")]
    assert "names no object key after the bucket" in found[("adapter 'legal-v1'", "source")]
    assert all(
        message.startswith("an S3 source must be s3://<bucket>/<key>.tar.gz")
        for (subject, _), message in found.items()
        if subject.startswith("adapter")
    )
    artifact = found[(f"manifest '{path}'", "base_model.artifact")]
    assert "bucket 'mo' is 2 character(s); S3 bucket names are 3 to 63" in artifact


def test_a_lock_entry_uri_is_read_by_the_same_parser(tmp_path):
    from cdk_adapters.manifest.lock import load_lock

    lock = tmp_path / "adapters.lock.json"
    facts = {"rank": 8}
    lock.write_text(
        json.dumps(
            {
                "version": 2,
                "adapters": {
                    "triage-v1": {"uri": "s3://Bad_Bucket/a.tar.gz", "sha256": "0" * 64, "size": 1, "facts": facts},
                    "billing-v1": {"uri": "s3://adapters/billing-v1/", "sha256": "0" * 64, "size": 1, "facts": facts},
                },
            }
        )
    )
    with pytest.raises(ConfigurationError) as caught:
        load_lock(lock)
    found = {p.field: p.message for p in caught.value.problems if p.field.endswith(".uri")}
    assert "bucket 'Bad_Bucket' may hold only lower-case letters" in found["adapters.triage-v1.uri"]
    assert "must name an s3://<bucket>/<key>.tar.gz archive" in found["adapters.billing-v1.uri"]


def test_cache_smaller_than_resident_set(tmp_path):
    with pytest.raises(ConfigurationError) as caught:
        load_manifest(write_manifest(tmp_path, [], serving={"max_loras": 4, "max_cpu_loras": 2}))
    assert "max_cpu_loras (2) must be >= max_loras (4)" in caught.value.problems[0].message


def test_duplicate_yaml_keys_are_refused():
    text = "base_model:\n  id: a\n  id: b\n"
    with pytest.raises(ConfigurationError, match="duplicate key 'id'"):
        parse_manifest(text)


def test_not_yaml_and_not_a_mapping_and_missing_file(tmp_path):
    with pytest.raises(ConfigurationError, match="is not valid YAML"):
        parse_manifest("adapters: [unclosed")
    with pytest.raises(ConfigurationError, match="must be a YAML mapping"):
        parse_manifest("- just a list")
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_manifest(tmp_path / "absent.yaml")


def test_unknown_version(tmp_path):
    path = write_manifest(tmp_path, [])
    path.write_text(path.read_text().replace("version: 1", "version: 2"))
    with pytest.raises(ConfigurationError, match="only manifest version 1 exists"):
        load_manifest(path)


def test_a_rows_limits_parse_and_bad_ones_name_the_adapter_and_field(tmp_path):
    good = write_manifest(
        tmp_path,
        [
            {
                "name": "bulk-v1",
                "source": "s3://example-adapters/adapters/bulk-v1/adapter.tar.gz",
                "limits": {"weight": 0.5, "max_in_flight": 4, "max_queue": 32, "max_queue_wait_s": 10, "max_n": 2},
            },
        ],
        name="good.yaml",
    )
    (row,) = load_manifest(good).manifest.adapters
    assert row.limits.model_dump() == {"weight": 0.5, "max_in_flight": 4, "max_queue": 32, "max_queue_wait_s": 10.0, "max_n": 2}
    assert row.limits.to_limits().max_n == 2
    bad = write_manifest(
        tmp_path,
        [
            {
                "name": "bulk-v1",
                "source": "s3://example-adapters/adapters/bulk-v1/adapter.tar.gz",
                "limits": {"weight": 0, "max_in_flight": 0, "max_queue_wait_s": 120, "burst": 3, "max_n": 0},
            },
        ],
        name="bad.yaml",
    )
    with pytest.raises(ConfigurationError) as caught:
        load_manifest(bad)
    assert sorted(problems_of(caught.value)) == [
        ("adapter 'bulk-v1'", "limits.burst"),
        ("adapter 'bulk-v1'", "limits.max_in_flight"),
        ("adapter 'bulk-v1'", "limits.max_n"),
        ("adapter 'bulk-v1'", "limits.max_queue_wait_s"),
        ("adapter 'bulk-v1'", "limits.weight"),
    ]
