"""A manifest's ``serving.tiers``: checked by the schema, carried into the endpoint, and shown by the
example app's synth summary only when the manifest asks for tiers."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template

import app as example_app
from cdk_adapters import ComputeRequirements, Instances, endpoint_from_manifest
from cdk_adapters.cli import main, synth_summary
from cdk_adapters.manifest import load_manifest, plan_manifest
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import app_context

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "example.yaml"
TIERS = [{"max_lora_rank": 16}, {"max_lora_rank": 64, "max_loras": 2, "copies": 2}]


def tiered_manifest(directory: Path, *, tiers=TIERS, big_rank: int = 64, **serving) -> Path:
    """The example manifest with rank tiers and one more published row, ``legal-v1``, of `big_rank`."""
    document = yaml.safe_load(EXAMPLE.read_text())
    document["serving"] = {"max_loras": 4, "max_cpu_loras": 8, "tiers": tiers, **serving}
    document["adapters"].append({"name": "legal-v1", "source": "s3://example-ml-adapters/adapters/legal-v1/adapter.tar.gz"})
    lock = json.loads(EXAMPLE.with_suffix(".lock.json").read_text())
    entry = copy.deepcopy(lock["adapters"]["support-de-v1"])
    entry["facts"].update(rank=big_rank, max_rank=big_rank, alpha=2.0 * big_rank)
    entry["uri"] = document["adapters"][-1]["source"]
    lock["adapters"]["legal-v1"] = entry
    path = directory / "tiered.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    path.with_suffix(".lock.json").write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    return path


def test_the_plan_carries_the_tiers_and_checks_against_the_largest(tmp_path):
    plan = plan_manifest(load_manifest(tiered_manifest(tmp_path)))
    assert plan.tier_ranks == (16, 64) and plan.max_lora_rank == 16 and plan.reference.max_lora_rank == 64
    [tier] = plan.rank_tiers()
    assert (tier.max_lora_rank, tier.max_loras, tier.max_cpu_loras, tier.copy_count) == (64, 2, 8, 2)


def test_a_row_no_tier_holds_fails_the_gate_naming_it(tmp_path):
    with pytest.raises(ConfigurationError) as caught:
        plan_manifest(load_manifest(tiered_manifest(tmp_path, big_rank=128)))
    assert "legal-v1" in str(caught.value) and "rank 128 exceeds max_lora_rank 64" in str(caught.value)


@pytest.mark.parametrize(
    ("tiers", "serving", "message"),
    [
        ([{"max_lora_rank": 64}, {"max_lora_rank": 16}], {}, "ranks must rise, each once"),
        ([{"max_lora_rank": 16}], {}, "list at least two"),
        (TIERS, {"max_lora_rank": 32}, "max_lora_rank (32) must be the first tier's (16)"),
        (
            [{"max_lora_rank": 16, "copies": 2}, {"max_lora_rank": 64}],
            {},
            "tiers[0].copies, min_copies, max_copies: the first tier is the endpoint's own",
        ),
        ([{"max_lora_rank": 16}, {"max_lora_rank": 48}], {}, "vLLM accepts only"),
    ],
)
def test_the_schema_refuses_malformed_tiers(tmp_path, tiers, serving, message):
    with pytest.raises(ConfigurationError) as caught:
        plan_manifest(load_manifest(tiered_manifest(tmp_path, tiers=tiers, **serving)))
    assert message in str(caught.value)


def synth_prod(tmp_path: Path, manifest: Path | None, **settings) -> str:
    """The example app's prod environment, synthesized in-process, as the synth summary renders it."""
    context = app_context("prod")
    context["environments"]["prod"].update(settings)
    if manifest is not None:
        context["manifest"] = str(manifest)
    context["aws:cdk:enable-asset-metadata"] = True  # as the CLI sets it: the summary finds the shards by it
    outdir = tmp_path / "cdk.out"
    app = cdk.App(context=context, outdir=str(outdir))
    example_app.build(app)
    app.synth()
    return synth_summary.render(synth_summary.summarize(outdir))


def test_prod_shows_two_tiers_only_when_its_manifest_asks(tmp_path):
    tiered = synth_prod(tmp_path / "tiered", tiered_manifest(tmp_path), initial_instance_count=4, max_instance_count=10)
    [line] = [line for line in tiered.splitlines() if "rank tiers" in line]
    assert line.startswith("  rank tiers (2): ")
    assert "-base max_lora_rank 16 (2 adapters)" in line and "-base-r64 max_lora_rank 64 (1 adapters)" in line
    plain = synth_prod(tmp_path / "plain", None)
    assert "rank tiers" not in plain


def test_prod_refuses_tiers_its_instances_cannot_hold(tmp_path):
    with pytest.raises(RuntimeError) as caught:
        synth_prod(tmp_path, tiered_manifest(tmp_path))
    message = str(caught.value)
    assert "the tiers' copies at creation" in message and "instances.initial_count=2" in message
    assert "each tier's copy loads the base model's weights again" in message


def test_a_tier_autoscales_in_its_own_range_on_the_environments_targets(tmp_path):
    tiers = [TIERS[0], {**TIERS[1], "min_copies": 2, "max_copies": 4}]
    context = app_context("prod")
    context["environments"]["prod"].update(initial_instance_count=4, max_instance_count=12)
    context["manifest"] = str(tiered_manifest(tmp_path, tiers=tiers))
    stack = example_app.build(cdk.App(context=context, outdir=str(tmp_path / "out")))
    resources = Template.from_stack(stack).find_resources("AWS::ApplicationAutoScaling::ScalableTarget")
    ranges = sorted((r["Properties"]["MinCapacity"], r["Properties"]["MaxCapacity"]) for r in resources.values())
    assert ranges == [(2, 4), (2, 8)], "the first tier keeps cdk.json's range, the rank-64 tier has its own"
    policies = Template.from_stack(stack).find_resources("AWS::ApplicationAutoScaling::ScalingPolicy")
    assert len(policies) == 2, "each tier tracks the environment's target"
    with pytest.raises(ConfigurationError, match=r"tiers\[0\]\.copies, min_copies, max_copies"):
        plan_manifest(load_manifest(tiered_manifest(tmp_path, tiers=[{**TIERS[0], "min_copies": 1, "max_copies": 2}, TIERS[1]])))
    with pytest.raises(ConfigurationError, match="give both"):
        plan_manifest(load_manifest(tiered_manifest(tmp_path, tiers=[TIERS[0], {**TIERS[1], "max_copies": 2}])))


def cli(*arguments: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(arguments), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def set_row(path: Path, name: str, **fields) -> None:
    document = yaml.safe_load(path.read_text())
    for row in document["adapters"]:
        if row["name"] == name:
            row.update(fields)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def set_tiers(path: Path, tiers: list[dict]) -> None:
    document = yaml.safe_load(path.read_text())
    document["serving"]["tiers"] = tiers
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def test_the_tier_record_refuses_a_move_the_row_does_not_ask_for(tmp_path):
    manifest = tiered_manifest(tmp_path, big_rank=32)  # legal-v1, rank 32, on the rank-64 tier
    status, out, _ = cli("tiers", "--manifest", str(manifest))
    assert status == 0 and "legal-v1: base-r64, the rank-64 tier" in out
    record = json.loads(manifest.with_suffix("").with_suffix(".tiers.json").read_text())
    assert record["tiers"] == {"legal-v1": "base-r64", "support-de-v1": "base", "support-en-v1": "base"}
    assert cli("tiers", "--manifest", str(manifest), "--check")[0] == 0

    set_tiers(manifest, [TIERS[0], {"max_lora_rank": 32}, TIERS[1]])  # a tier inserted below legal-v1's
    with pytest.raises(ConfigurationError) as caught:
        plan_manifest(load_manifest(manifest))
    message = str(caught.value)
    assert "adapter 'legal-v1': tier: would move from base component base-r64" in message
    assert "to base-r32 (the rank-32 tier)" in message and "`tier: 64` keeps it on base-r64" in message
    assert "support-en-v1" not in message, "rows the new tier does not touch stay where they are"
    status, _, err = cli("tiers", "--manifest", str(manifest))
    assert status == 1 and "would move" in err, "the record is not rewritten over an unconfirmed move"

    set_row(manifest, "legal-v1", tier=64)  # stay
    assert plan_manifest(load_manifest(manifest)).tiers["legal-v1"] == 64
    set_row(manifest, "legal-v1", tier=32)  # move, on purpose
    assert plan_manifest(load_manifest(manifest)).tiers["legal-v1"] == 32
    status, _, err = cli("tiers", "--manifest", str(manifest), "--check")
    assert status == 1 and "out of date" in err
    assert cli("tiers", "--manifest", str(manifest))[0] == 0 and cli("tiers", "--manifest", str(manifest), "--check")[0] == 0


def test_a_pin_must_be_a_tier_that_holds_the_rank(tmp_path):
    manifest = tiered_manifest(tmp_path, big_rank=32)
    set_row(manifest, "legal-v1", tier=16)
    with pytest.raises(ConfigurationError, match="tier: \\(16\\) cannot hold the adapter's rank 32"):
        plan_manifest(load_manifest(manifest))
    set_row(manifest, "legal-v1", tier=128)
    with pytest.raises(ConfigurationError, match="tier: \\(128\\) is none of the tiers' max_lora_rank \\(16, 64\\)"):
        plan_manifest(load_manifest(manifest))


def test_the_endpoint_attaches_each_row_where_the_plan_places_it(tmp_path):
    manifest = tiered_manifest(tmp_path, big_rank=32)
    set_tiers(manifest, [TIERS[0], {"max_lora_rank": 32}, TIERS[1]])
    set_row(manifest, "legal-v1", tier=64)
    stack = cdk.Stack(cdk.App(), "Tiered")
    endpoint = endpoint_from_manifest(
        stack,
        "Serving",
        manifest=manifest,
        instances=Instances(instance_type="ml.g6.12xlarge"),
        compute=ComputeRequirements(min_memory_required_in_mb=16384),
    )
    spec = stack.resolve(endpoint.adapters["legal-v1"].resource.specification)
    assert spec["baseInferenceComponentName"] == f"{endpoint.prefix}-base-r64"
    assert [tier.max_lora_rank for tier in endpoint.rank_tiers] == [32, 64]


def test_validate_lists_each_tier_with_its_adapters(tmp_path):
    status, out, _ = cli("validate", str(tiered_manifest(tmp_path)))
    assert status == 0 and "ok: rank tiers: rank 16 (2 adapter(s)), rank 64 (1 adapter(s))" in out


def test_a_tier_below_the_first_moves_the_first_tiers_adapters_and_is_refused(tmp_path):
    manifest = tiered_manifest(tmp_path, big_rank=32)
    assert cli("tiers", "--manifest", str(manifest))[0] == 0
    set_tiers(manifest, [{"max_lora_rank": 8}, *TIERS])  # base now serves rank 8: its rank-16 adapters would go to base-r16
    with pytest.raises(ConfigurationError) as caught:
        plan_manifest(load_manifest(manifest))
    message = str(caught.value)
    for row in ("support-en-v1", "support-de-v1"):
        assert f"adapter '{row}': tier: would move from base component base, where the tier record has it, to base-r16" in message
    assert "base cannot hold it any more" in message
    assert "legal-v1" not in message, "base-r64 is the same base component whatever the first tier's rank"
    status, _, err = cli("tiers", "--manifest", str(manifest), "--check")
    assert status == 1 and "would move" in err


def test_a_later_tier_takes_serving_slots_not_the_first_tiers(tmp_path):
    tiers = [{"max_lora_rank": 16, "max_loras": 8, "max_cpu_loras": 16}, {"max_lora_rank": 64}]
    [tier] = plan_manifest(load_manifest(tiered_manifest(tmp_path, tiers=tiers))).rank_tiers()
    assert (tier.max_loras, tier.max_cpu_loras) == (4, 8)


def test_a_later_tiers_host_cache_defaults_to_its_own_slots_and_is_checked_in_the_schema(tmp_path):
    tiers = [{"max_lora_rank": 16, "max_cpu_loras": 16}, {"max_lora_rank": 64}]
    manifest = tiered_manifest(tmp_path, tiers=tiers)
    document = yaml.safe_load(manifest.read_text())
    del document["serving"]["max_cpu_loras"]
    manifest.write_text(yaml.safe_dump(document, sort_keys=False))
    [tier] = plan_manifest(load_manifest(manifest)).rank_tiers()
    assert (tier.max_loras, tier.max_cpu_loras) == (4, 4), "vLLM's default (= max_loras), not the first tier's 16"
    with pytest.raises(ConfigurationError, match=r"tiers\[1\]: max_cpu_loras \(8\) must be >= max_loras \(16\)"):
        plan_manifest(load_manifest(tiered_manifest(tmp_path, tiers=[TIERS[0], {"max_lora_rank": 64, "max_loras": 16}])))


@pytest.mark.parametrize("content", [b"\xff\xfe not utf-8", b'{"version": 1, "tiers": {"legal-v1": "base-r48"}}'])
def test_a_bad_tier_record_is_named(tmp_path, content):
    manifest = tiered_manifest(tmp_path)
    manifest.with_suffix("").with_suffix(".tiers.json").write_bytes(content)
    with pytest.raises(ConfigurationError, match=r"tier record '.*tiered\.tiers\.json'"):
        plan_manifest(load_manifest(manifest))
