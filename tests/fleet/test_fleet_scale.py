"""A 1,000-adapter endpoint, end to end: manifest and gate, synth with cdk-nag, cfn-lint, resource
budgets, constant IAM and discovery, and stable placement proven with the real CDK CLI's diff.
The endpoint has its deploy check on, so the same syntheses show what the check runs when one
adapter is added to a thousand.

The three syntheses (1,000 adapters; one added; one removed from the middle) are shared by the
module; each costs 10-20 s on a 2-core machine, the nag packs about as much again.
"""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest

from cdk_adapters.cli import main as cli_main
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.deploy_check.deploy_check import RESOURCE_TYPE, DeployCheck
from cdk_adapters.deploy_check.handler import index as deploy_check_handler
from cdk_adapters.endpoint.execution_role import ROLE_INLINE_POLICY_LIMIT
from cdk_adapters.endpoint.fleet import CLOUDFORMATION_RESOURCE_LIMIT, DEFAULT_SHARD_CAPACITY, FleetPlacement
from tests.constructs.conftest import VENV_BIN
from tests.fleet.builders import STACK, adapter_name, synth_fleet, write_fleet_manifest
from tests.support.cdk_diff import NESTED_SUFFIX, diff_assemblies

FLEET = 1000
MIDDLE = FLEET // 2

pytestmark = pytest.mark.cdk_cli


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> dict[str, Path]:
    """Cloud assemblies: 1,000 adapters (with the nag packs), 1,001, and 999 (the middle one removed)."""
    root = tmp_path_factory.mktemp("fleet")
    manifests = {
        "full": write_fleet_manifest(root / "full", range(FLEET)),
        "plus_one": write_fleet_manifest(root / "plus-one", range(FLEET + 1)),
        "minus_middle": write_fleet_manifest(root / "minus-middle", [i for i in range(FLEET) if i != MIDDLE]),
    }
    assemblies = {"manifest": manifests["full"]}
    for label, manifest in manifests.items():
        assemblies[label] = synth_fleet(manifest, root / f"{label}.out", nag=label == "full", deploy_check=DeployCheck())
    return assemblies


def templates(assembly: Path) -> dict[str, dict]:
    paths = [assembly / f"{STACK}.template.json", *sorted(assembly.glob(f"*{NESTED_SUFFIX}"))]
    return {path.name: json.loads(path.read_text()) for path in paths}


def test_a_thousand_row_manifest_validates_with_the_cli(fleet):
    out, err = io.StringIO(), io.StringIO()
    assert cli_main(["validate", str(fleet["manifest"])], stdout=out, stderr=err) == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert sum(line.startswith("ok: adapter 'tenant-") for line in lines) == FLEET
    assert f"{FLEET} adapter(s)" in lines[-1]


def test_every_template_stays_within_its_resource_budget(fleet):
    found = templates(fleet["full"])
    counts = {name: len(template["Resources"]) for name, template in found.items()}
    parent = counts.pop(f"{STACK}.template.json")
    assert parent < 30, parent
    assert len(counts) == FleetPlacement().shards
    assert all(count <= DEFAULT_SHARD_CAPACITY < CLOUDFORMATION_RESOURCE_LIMIT for count in counts.values()), counts
    components = [
        resource
        for template in found.values()
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::SageMaker::InferenceComponent"
    ]
    assert len(components) == FLEET + 1  # the base component and one per adapter
    # Each shard holds its components and nothing else: one resource per adapter.
    per_shard = {
        name: {resource["Type"] for resource in template["Resources"].values()}
        for name, template in found.items()
        if name.endswith(NESTED_SUFFIX)
    }
    assert all(kinds == {"AWS::SageMaker::InferenceComponent"} for kinds in per_shard.values()), per_shard


def test_cfn_lint_finds_no_error_in_any_template_nested_ones_included(fleet):
    paths = [str(fleet["full"] / name) for name in templates(fleet["full"])]
    lint = subprocess.run([str(VENV_BIN / "cfn-lint"), *paths], capture_output=True, text=True, timeout=900)
    assert lint.returncode & 2 == 0, lint.stdout + lint.stderr


def test_nag_packs_ran_and_found_nothing_unacknowledged(fleet):
    # synth raises on a failed plugin; a clean run leaves an empty report.
    report = json.loads((fleet["full"] / "validation-report.json").read_text())
    assert [plugin for plugin in report["pluginReports"] if plugin.get("conclusion") == "failure"] == []


def role_policy_characters(assembly: Path, *, deploy_check: bool = False) -> int:
    """Characters of the execution role's policies (or, with `deploy_check`, of the check's)."""
    parent = templates(assembly)[f"{STACK}.template.json"]
    documents = [
        r["Properties"]["PolicyDocument"]
        for logical_id, r in parent["Resources"].items()
        if r["Type"] == "AWS::IAM::Policy" and logical_id.startswith("ServingDeployCheck") == deploy_check
    ]
    return sum(len("".join(json.dumps(document, separators=(",", ":")).split())) for document in documents)


def discovery_value(assembly: Path) -> str:
    parent = templates(assembly)[f"{STACK}.template.json"]
    [parameter] = [r for r in parent["Resources"].values() if r["Type"] == "AWS::SSM::Parameter"]
    return parameter["Properties"]["Value"]


def test_role_policy_and_discovery_record_do_not_grow_with_the_fleet(fleet, tmp_path):
    ten = synth_fleet(write_fleet_manifest(tmp_path / "ten", range(10)), tmp_path / "ten.out", deploy_check=DeployCheck())
    assert role_policy_characters(ten) == role_policy_characters(fleet["full"]) < ROLE_INLINE_POLICY_LIMIT // 4
    assert role_policy_characters(ten, deploy_check=True) == role_policy_characters(fleet["full"], deploy_check=True) < 2000
    assert discovery_value(ten) == discovery_value(fleet["full"])
    record = DiscoveryRecord.from_json(discovery_value(fleet["full"]))
    assert len(discovery_value(fleet["full"])) < 1500  # names, rule and the serving reference (base facts)
    components = {
        r["Properties"]["InferenceComponentName"]
        for template in templates(fleet["full"]).values()
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SageMaker::InferenceComponent"
    }
    assert {record.component_name(adapter_name(i)) for i in range(FLEET)} | {record.base_inference_component_name} == components


def test_adapters_are_deleted_before_the_base_and_the_base_before_the_endpoint(fleet):
    parent = templates(fleet["full"])[f"{STACK}.template.json"]["Resources"]
    [base_id] = [k for k, r in parent.items() if r["Type"] == "AWS::SageMaker::InferenceComponent"]
    [endpoint_id] = [k for k, r in parent.items() if r["Type"] == "AWS::SageMaker::Endpoint"]
    shards = {k: r for k, r in parent.items() if r["Type"] == "AWS::CloudFormation::Stack"}
    assert len(shards) == FleetPlacement().shards
    # CloudFormation deletes in reverse dependency order: shards (adapters) first, then the base.
    assert all(base_id in shard.get("DependsOn", []) for shard in shards.values())
    assert parent[base_id]["Properties"]["EndpointName"] == {"Fn::GetAtt": [endpoint_id, "EndpointName"]}


def test_adding_one_adapter_to_a_thousand_shows_only_its_addition(fleet, tmp_path):
    diff = diff_assemblies(fleet["full"], fleet["plus_one"], STACK, tmp_path)
    added = adapter_name(FLEET)
    assert diff.added == diff.removed == []
    nested = {name: lines for name, lines in diff.changed.items() if name.endswith(NESTED_SUFFIX)}
    [(shard_file, lines)] = nested.items()
    assert f"Shard{FleetPlacement().shard_of(added)}" in shard_file
    assert len(lines) == 1 and lines[0].startswith("[+] AWS::SageMaker::InferenceComponent") and added in lines[0]
    # The parent's only changes: that shard's template reference (how a nested update happens) and
    # the deploy check's list of adapters.
    assert sorted(diff.changed[f"{STACK}.template.json"]) == [shard_url_change(diff), deploy_check_change(diff)]
    assert len(diff.unchanged) == FleetPlacement().shards - 1


def test_removing_one_from_the_middle_shows_only_its_removal(fleet, tmp_path):
    diff = diff_assemblies(fleet["full"], fleet["minus_middle"], STACK, tmp_path)
    removed = adapter_name(MIDDLE)
    nested = {name: lines for name, lines in diff.changed.items() if name.endswith(NESTED_SUFFIX)}
    [(shard_file, lines)] = nested.items()
    assert f"Shard{FleetPlacement().shard_of(removed)}" in shard_file
    assert len(lines) == 1 and lines[0].startswith("[-] AWS::SageMaker::InferenceComponent") and removed in lines[0]
    assert sorted(diff.changed[f"{STACK}.template.json"]) == [shard_url_change(diff), deploy_check_change(diff)]
    assert len(diff.unchanged) == FleetPlacement().shards - 1


def shard_url_change(diff) -> str:
    [line] = [line for line in diff.changed[f"{STACK}.template.json"] if line.startswith("[~] AWS::CloudFormation::Stack")]
    assert line.endswith("{TemplateURL}")
    return line


def deploy_check_change(diff) -> str:
    [line] = [line for line in diff.changed[f"{STACK}.template.json"] if line.startswith(f"[~] {RESOURCE_TYPE}")]
    assert line.endswith("{Adapters}"), line
    return line


def deploy_check_properties(assembly: Path) -> tuple[dict, list[str]]:
    parent = templates(assembly)[f"{STACK}.template.json"]["Resources"]
    [check] = [r for r in parent.values() if r["Type"] == RESOURCE_TYPE]
    return check["Properties"], check["DependsOn"]


def test_the_deploy_check_waits_for_every_shard_and_invokes_only_what_a_deploy_changes(fleet):
    full, depends_on = deploy_check_properties(fleet["full"])
    parent = templates(fleet["full"])[f"{STACK}.template.json"]["Resources"]
    shards = {k for k, r in parent.items() if r["Type"] == "AWS::CloudFormation::Stack"}
    assert len(shards) == FleetPlacement().shards and shards <= set(depends_on)
    assert sorted(full["Adapters"]) == [adapter_name(i) for i in range(FLEET)]
    # The first deploy checks all of them; adding one checks that one; removing one checks none.
    assert len(deploy_check_handler.changed_adapters(full, None)) == FLEET
    plus_one, _ = deploy_check_properties(fleet["plus_one"])
    assert deploy_check_handler.changed_adapters(plus_one, full) == [adapter_name(FLEET)]
    minus_middle, _ = deploy_check_properties(fleet["minus_middle"])
    assert deploy_check_handler.changed_adapters(minus_middle, full) == []
    # What CloudFormation sends the handler on that update (new and old properties) stays small:
    # about 38 bytes per adapter (docs/deploy-check.md).
    assert len(json.dumps(plus_one)) + len(json.dumps(full)) < 2 * 40 * (FLEET + 1)
