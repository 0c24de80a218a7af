"""Rolling back is one alias row: through the real CDK CLI, changing an alias changes only the
discovery parameter's value, never an inference component (nor any other resource)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cdk_adapters.contract.discovery import DiscoveryRecord
from tests.constructs.conftest import REPO_ROOT, app_environments, run_cdk
from tests.support.cdk_diff import diff_assemblies

pytestmark = pytest.mark.cdk_cli

DEV_STACK = app_environments()["dev"]["stack_name"]
EXAMPLE_MANIFEST = REPO_ROOT / "manifests" / "example.yaml"


def synth_with_aliases(directory: Path, aliases: dict) -> Path:
    """``cdk synth`` of the example app with a copy of the example manifest carrying `aliases`."""
    directory.mkdir(parents=True)
    manifest = yaml.safe_load(EXAMPLE_MANIFEST.read_text())
    manifest["aliases"] = aliases
    path = directory / "manifest.yaml"
    path.write_text(yaml.safe_dump(manifest))
    path.with_suffix(".lock.json").write_text(EXAMPLE_MANIFEST.with_suffix(".lock.json").read_text())
    outdir = directory / "cdk.out"
    synth = run_cdk("synth", "-c", f"manifest={path}", "--quiet", "--output", str(outdir))
    assert synth.returncode == 0, synth.stdout + synth.stderr
    return outdir


def published_record(assembly: Path) -> DiscoveryRecord:
    """The discovery record in the stack's SSM parameter (its value is plain JSON once synthesized)."""
    template = json.loads((assembly / f"{DEV_STACK}.template.json").read_text())
    [value] = [r["Properties"]["Value"] for r in template["Resources"].values() if r["Type"] == "AWS::SSM::Parameter"]
    if isinstance(value, dict):  # a token left in the value: join its literal parts for the check
        value = "".join(part if isinstance(part, str) else "X" for part in value["Fn::Join"][1])
    return DiscoveryRecord.from_json(value)


def test_changing_one_alias_row_changes_only_the_discovery_value(tmp_path):
    stable = synth_with_aliases(tmp_path / "stable", {"support-en": "support-en-v1"})
    canary = synth_with_aliases(tmp_path / "canary", {"support-en": {"support-en-v1": 90, "support-de-v1": 10}})
    assert published_record(stable).aliases == {"support-en": {"support-en-v1": 100}}
    assert published_record(canary).aliases == {"support-en": {"support-en-v1": 90, "support-de-v1": 10}}

    for old, new in ((stable, canary), (canary, stable)):  # the canary, then its rollback
        diff = diff_assemblies(old, new, DEV_STACK, tmp_path / f"diff-{new.parent.name}")
        assert diff.added == [] and diff.removed == []
        assert all(name == f"{DEV_STACK}.template.json" for name in diff.changed), "no nested (component) template changes"
        [change] = diff.lines()
        assert change.startswith("[~] AWS::SSM::Parameter") and change.endswith("{Value}"), change
        assert not any("InferenceComponent" in line for line in diff.lines())
