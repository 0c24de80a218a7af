"""The manifest's compatibility gate: rows, lock entries, names and limits, every problem at once."""

from __future__ import annotations

import json

import pytest

from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.manifest import check_manifest, load_manifest, plan_manifest, plan_manifest_file
from cdk_adapters.problems import ConfigurationError
from tests.manifest.builders import lock_adapters, s3_uri, write_manifest


@pytest.fixture
def published_manifest(zoo, tmp_path):
    """A manifest with two published (s3://) adapters and one local directory, locked."""
    path = write_manifest(
        tmp_path,
        [
            {"name": "triage-v3", "source": s3_uri("triage-v3")},
            {"name": "billing-v1", "source": s3_uri("billing-v1")},
            {"name": "legal-v1", "source": str(zoo.adapter("rank-pattern-32"))},
        ],
        serving={"max_loras": 2, "max_cpu_loras": 6},
    )
    lock_adapters(path, {"triage-v3": zoo.adapter("good"), "billing-v1": zoo.adapter("good-2")}, tmp_path)
    return path


def fields(problems):
    return [(p.subject, p.field) for p in problems]


def test_good_manifest_plans_and_derives_the_rank(published_manifest, zoo):
    plan = plan_manifest(load_manifest(published_manifest))
    assert [a.name for a in plan.adapters] == ["triage-v3", "billing-v1", "legal-v1"]
    assert plan.adapters[0].lock_entry.uri == s3_uri("triage-v3")
    assert plan.adapters[2].local_dir == zoo.adapter("rank-pattern-32")
    assert plan.max_lora_rank == 32  # rank_pattern gives legal-v1's q_proj rank 32
    options = plan.vllm_options(VllmOptions(max_model_len=256))
    assert (options.max_loras, options.max_cpu_loras, options.max_lora_rank, options.max_model_len) == (2, 6, 32, 256)


def test_explicit_max_lora_rank_is_enforced(published_manifest):
    published_manifest.write_text(
        published_manifest.read_text().replace("max_cpu_loras: 6", "max_cpu_loras: 6\n  max_lora_rank: 16")
    )
    problems, plan = check_manifest(load_manifest(published_manifest))
    assert plan is None
    assert fields(problems) == [("adapter 'legal-v1'", "rank_pattern")]


def test_missing_lock_entry(zoo, tmp_path):
    path = write_manifest(tmp_path, [{"name": "triage-v3", "source": s3_uri("triage-v3")}])
    problems, _ = check_manifest(load_manifest(path))
    assert fields(problems) == [("adapter 'triage-v3'", "source")]
    assert "has no entry in" in problems[0].message and "cdk-adapters lock" in problems[0].message


def test_lock_entry_that_disagrees_with_the_row(published_manifest):
    moved = s3_uri("billing-v1").replace("adapter.tar.gz", "moved.tar.gz")  # same location, other object
    text = published_manifest.read_text().replace(s3_uri("billing-v1"), moved)
    published_manifest.write_text(text)
    problems, _ = check_manifest(load_manifest(published_manifest))
    assert fields(problems) == [("adapter 'billing-v1'", "source")]
    assert "its lock entry records s3://example-adapters/adapters/billing-v1/adapter.tar.gz" in problems[0].message


def test_lock_facts_are_gated(zoo, tmp_path):
    path = write_manifest(tmp_path, [{"name": "triage-v3", "source": s3_uri("triage-v3")}])
    lock_adapters(path, {"triage-v3": zoo.adapter("dora")}, tmp_path)
    problems, _ = check_manifest(load_manifest(path))
    assert fields(problems) == [("adapter 'triage-v3'", "use_dora")]


def test_corrupt_lock_file(published_manifest):
    lock = published_manifest.with_name("adapters.lock.json")
    data = json.loads(lock.read_text())
    data["adapters"]["triage-v3"]["sha256"] = "not-a-hash"
    data["adapters"]["triage-v3"]["extra"] = 1
    data["adapters"]["billing-v1"]["facts"]["rank"] = "eight"
    data["adapters"]["billing-v1"]["facts"]["ranks"] = 8
    lock.write_text(json.dumps(data))
    with pytest.raises(ConfigurationError) as caught:
        load_manifest(published_manifest)
    assert {p.field for p in caught.value.problems} == {
        "adapters.triage-v3.sha256",
        "adapters.triage-v3.extra",
        "adapters.billing-v1.facts.rank",
        "adapters.billing-v1.facts.ranks",
    }
    assert all(p.subject == f"lock file '{lock}'" for p in caught.value.problems)


def test_lock_file_of_the_old_flat_format(published_manifest):
    lock = published_manifest.with_name("adapters.lock.json")
    lock.write_text(json.dumps({"version": 1, "adapters": {}}))
    with pytest.raises(ConfigurationError) as caught:
        load_manifest(published_manifest)
    assert [p.field for p in caught.value.problems] == ["version"]
    assert "rewrite it with `cdk-adapters lock --manifest MANIFEST`" in caught.value.problems[0].message


def test_names(zoo, tmp_path):
    good = str(zoo.adapter("good"))
    path = write_manifest(
        tmp_path,
        [
            {"name": "Support_Triage-v1", "source": good},
            {"name": "a-very-long-adapter-name-for-one-tenant-v1", "source": good},
            {"name": "billing", "source": good},
            {"name": "legal-v1", "source": good},
            {"name": "legal-v1", "source": good},
        ],
    )
    problems, plan = check_manifest(load_manifest(path))
    assert plan is None
    assert fields(problems) == [
        ("adapter 'Support_Triage-v1'", "name"),
        ("adapter 'a-very-long-adapter-name-for-one-tenant-v1'", "name"),
        ("adapter 'legal-v1'", "name"),
        ("adapter 'billing'", "name"),
    ]
    messages = [p.message for p in problems]
    assert "must match ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$" in messages[0]
    assert "at most 39 fit" in messages[1]
    assert "is listed 2 times" in messages[2]
    assert "version suffix -v<N>" in messages[3]


def test_target_modules_differ_unless_the_row_acknowledges_the_rule(zoo, tmp_path):
    rows = [
        {"name": "triage-v1", "source": str(zoo.adapter("good"))},
        {"name": "billing-v1", "source": str(zoo.adapter("good-2"))},
        {"name": "style-v1", "source": str(zoo.adapter("mlp"))},
    ]
    problems, _ = check_manifest(load_manifest(write_manifest(tmp_path, rows)))
    assert fields(problems) == [("adapter 'style-v1'", "target_modules")]
    assert "adds down_proj, gate_proj, up_proj" in problems[0].message
    assert problems[0].rule == "identical-target-modules"
    rows[2]["acknowledge"] = {
        "rule": "identical-target-modules",
        "reason": "style adapter adapts MLPs only; measured equal latency",
    }
    problems, plan = check_manifest(load_manifest(write_manifest(tmp_path, rows)))
    assert problems == [] and plan is not None
    assert [(f.problem.subject, f.problem.rule) for f in plan.acknowledged] == [
        ("adapter 'style-v1'", "identical-target-modules")
    ]


def test_missing_local_directory(tmp_path):
    path = write_manifest(tmp_path, [{"name": "triage-v1", "source": "./does-not-exist"}])
    problems, _ = check_manifest(load_manifest(path))
    assert fields(problems) == [("adapter 'triage-v1'", "source")]
    assert "does not exist (paths are relative to the manifest)" in problems[0].message


def test_every_problem_in_one_error(zoo, tmp_path):
    path = write_manifest(
        tmp_path,
        [
            {"name": "triage-v1", "source": str(zoo.adapter("dora"))},
            {"name": "billing-v1", "source": str(zoo.adapter("other-base"))},
            {"name": "legal", "source": s3_uri("legal")},
        ],
        serving={"max_lora_rank": 8},
    )
    with pytest.raises(ConfigurationError) as caught:
        plan_manifest(load_manifest(path))
    assert fields(caught.value.problems) == [
        ("adapter 'triage-v1'", "use_dora"),
        ("adapter 'billing-v1'", "base_model_name_or_path"),
        ("adapter 'legal'", "source"),
        ("adapter 'legal'", "name"),
    ]
    assert "failed the compatibility gate (4 problem(s))" in str(caught.value)


def test_module_shapes_from_base_facts_make_synth_exact(zoo, tmp_path):
    """`cdk-adapters base-facts` output pasted into base_model turns on the exact (GQA-aware) shape check."""
    import io

    import yaml

    from cdk_adapters.cli import main

    out = io.StringIO()
    assert main(["base-facts", str(zoo.base_dir)], stdout=out) == 0
    printed = yaml.safe_load(out.getvalue())
    rows = [{"name": "triage-v1", "source": str(zoo.adapter("good"))}, {"name": "gqa-v1", "source": str(zoo.adapter("gqa"))}]
    path = write_manifest(tmp_path, rows, base={key: printed[key] for key in ("hidden_size", "module_names", "module_shapes")})
    problems, plan = check_manifest(load_manifest(path))
    assert plan is None
    assert fields(problems) == [("adapter 'gqa-v1'", "adapter_model.safetensors")]
    assert "adapt a 32x64 layer but the base's k_proj is 64x64" in problems[0].message
    # Without module_shapes the manifest can only check hidden_size, which a GQA k_proj still reads.
    problems, plan = check_manifest(load_manifest(write_manifest(tmp_path, rows)))
    assert problems == [] and plan is not None


def test_module_shapes_must_name_listed_modules(tmp_path):
    path = write_manifest(tmp_path, [], base={"module_shapes": {"q_proj": [[64, 64]], "qkv_proj": [[192, 64]]}})
    with pytest.raises(ConfigurationError) as caught:
        load_manifest(path)
    assert fields(caught.value.problems) == [(f"manifest '{path}'", "base_model")]
    assert "module_shapes names qkv_proj, which module_names does not list" in caught.value.problems[0].message


def test_schema_errors_and_gate_errors_of_other_rows_are_reported_together(zoo, tmp_path):
    """A typo in one row must not hide the DoRA adapter, the duplicate and the bad name in others."""
    path = write_manifest(
        tmp_path,
        [
            {"name": "triage-v3", "source": s3_uri("triage-v3")},
            {"name": "Billing_Team", "source": s3_uri("billing"), "ownr": "ml@example.com"},
            {"name": "dora-v1", "source": str(zoo.adapter("dora"))},
            {"name": "triage-v3", "source": str(zoo.adapter("good-2"))},
        ],
    )
    lock_adapters(path, {"triage-v3": zoo.adapter("good")}, tmp_path)
    with pytest.raises(ConfigurationError) as raised:
        plan_manifest_file(path)
    found = fields(raised.value.problems)
    assert ("adapter 'Billing_Team'", "ownr") in found  # schema: unknown key
    assert ("adapter 'Billing_Team'", "name") in found  # name rules still run on the rejected row
    assert ("adapter 'dora-v1'", "use_dora") in found  # the gate still runs on the valid rows
    assert ("adapter 'triage-v3'", "name") in found  # duplicates count every row
    messages = "\n".join(str(p) for p in raised.value.problems)
    assert "is listed 2 times" in messages and "must end with a version suffix" in messages
    assert len(set(raised.value.problems)) == len(raised.value.problems)


def test_an_invalid_base_model_is_reported_without_guessing_at_the_rows(tmp_path):
    path = write_manifest(tmp_path, [{"name": "triage-v3", "source": s3_uri("triage-v3")}], base={"hidden_size": -1})
    with pytest.raises(ConfigurationError) as raised:
        plan_manifest_file(path)
    assert fields(raised.value.problems) == [(f"manifest '{path}'", "base_model.hidden_size")]
