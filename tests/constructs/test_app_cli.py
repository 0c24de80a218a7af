"""The example app through the real CDK CLI: synth, cfn-lint, summary, and stable logical IDs via cdk diff.

CLI runs are few and shared (session fixture); property checks live in the in-process tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cdk_adapters.cli import synth_summary
from cdk_adapters.endpoint.fleet import FleetPlacement
from tests.constructs.conftest import REPO_ROOT, VENV_BIN, app_environments, run_cdk
from tests.support import staged_image
from tests.support.cdk_diff import diff_assemblies

pytestmark = pytest.mark.cdk_cli

DEV_STACK = app_environments()["dev"]["stack_name"]
EXAMPLE_MANIFEST = REPO_ROOT / "manifests" / "example.yaml"
EXTRA_ADAPTER = "support-it-v1"
"""Hashes into the shard of support-en-v1, so the diff shows a change to an existing shard."""


def write_manifest(directory: Path, *, extra_rows: list[dict], extra_locks: dict[str, dict]) -> Path:
    """A copy of the example manifest (and its lock file) with more adapter rows."""
    manifest = yaml.safe_load(EXAMPLE_MANIFEST.read_text())
    manifest["adapters"] += extra_rows
    lock = json.loads(EXAMPLE_MANIFEST.with_suffix(".lock.json").read_text())
    lock["adapters"].update(extra_locks)
    path = directory / "manifest.yaml"
    path.write_text(yaml.safe_dump(manifest))
    path.with_suffix(".lock.json").write_text(json.dumps(lock))
    return path


def manifest_with_extra_adapter(directory: Path) -> Path:
    """The example manifest plus one published adapter, locked like its siblings."""
    lock = json.loads(EXAMPLE_MANIFEST.with_suffix(".lock.json").read_text())
    uri = f"s3://example-ml-adapters/adapters/{EXTRA_ADAPTER}/adapter.tar.gz"
    entry = dict(lock["adapters"]["support-en-v1"], uri=uri, sha256="f" * 64)
    return write_manifest(directory, extra_rows=[{"name": EXTRA_ADAPTER, "source": uri}], extra_locks={EXTRA_ADAPTER: entry})


def test_cli_synth_of_default_environment_is_clean(cli_dev_assembly: Path, capsys):
    template_path = cli_dev_assembly / f"{DEV_STACK}.template.json"
    nested_paths = sorted(cli_dev_assembly.glob("*.nested.template.json"))
    templates = [json.loads(path.read_text()) for path in [template_path, *nested_paths]]
    types = [r["Type"] for template in templates for r in template["Resources"].values()]
    manifest_adapters = yaml.safe_load(EXAMPLE_MANIFEST.read_text())["adapters"]
    assert types.count("AWS::SageMaker::InferenceComponent") == 1 + len(manifest_adapters)
    assert len(nested_paths) == len({FleetPlacement().shard_of(row["name"]) for row in manifest_adapters})
    assert "Parameters" not in templates[0] or set(templates[0]["Parameters"]) == {"BootstrapVersion"}
    lint_paths = [str(path) for path in [template_path, *nested_paths]]
    lint = subprocess.run([str(VENV_BIN / "cfn-lint"), *lint_paths], capture_output=True, text=True, timeout=600)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert synth_summary.main([str(cli_dev_assembly)]) == 0
    printed = capsys.readouterr().out
    assert f"stack {DEV_STACK}:" in printed and "adapters (2)" in printed and "no unacknowledged findings" in printed
    # README's sample of this summary shows the same first line (it said 18 when synth printed 20).
    [first_line] = [line for line in printed.splitlines() if line.startswith(f"stack {DEV_STACK}:")]
    assert f"```\n{first_line}\n" in (REPO_ROOT / "README.md").read_text()
    # The nag packs ran (CDK writes their report) and none of them failed.
    report = cli_dev_assembly / synth_summary.VALIDATION_REPORT
    assert report.is_file(), "cdk synth wrote no policy-validation report: did the nag packs run?"
    assert [p for p in json.loads(report.read_text())["pluginReports"] if p.get("conclusion") == "failure"] == []


def test_image_asset_builds_as_staged(cli_dev_assembly: Path, tmp_path):
    """`cdk deploy` runs ``docker build`` in cdk.out/asset.<hash>/: the folder must hold the
    Dockerfile the asset names and every COPY source, and the copied code must import alone."""
    (listing,) = staged_image.check_buildable(cli_dev_assembly, tmp_path).values()
    assert "container/Dockerfile" in listing and "container/adapter_server/middleware.py" in listing
    assert not [name for name in listing if name.startswith(("tests/", ".venv/")) or name == "cdk_adapters/endpoint/endpoint.py"]
    # The contract and the gate travel as whole folders; of the rest of cdk_adapters only its marker and error type.
    staged = {name for name in listing if name.startswith("cdk_adapters/")}
    assert {name for name in staged if not name.startswith(("cdk_adapters/contract/", "cdk_adapters/gate/"))} == {
        "cdk_adapters/__init__.py",
        "cdk_adapters/problems.py",
    }
    for folder in ("contract", "gate"):
        checkout = {path.relative_to(REPO_ROOT).as_posix() for path in (REPO_ROOT / "cdk_adapters" / folder).rglob("*.py")}
        assert checkout <= staged, sorted(checkout - staged)


def test_adding_then_removing_an_adapter_touches_no_other_resource(cli_dev_assembly: Path, tmp_path):
    """The example app's adapters sit in nested shards: adding one adds exactly its component to
    its shard's template; the parent's only change is that shard's template reference."""
    extra = f"manifest={manifest_with_extra_adapter(tmp_path)}"
    with_extra = tmp_path / "with-extra"
    synth = run_cdk("synth", "-c", extra, "--quiet", "--output", str(with_extra))
    assert synth.returncode == 0, synth.stdout + synth.stderr

    added = diff_assemblies(cli_dev_assembly, with_extra, DEV_STACK, tmp_path / "added")
    shard = f"Shard{FleetPlacement().shard_of(EXTRA_ADAPTER)}"
    assert added.added == [] and added.removed == [], "the extra adapter lands in a shard that exists already"
    [nested] = [name for name in added.changed if name.endswith(".nested.template.json")]
    assert shard in nested
    assert added.changed[nested] == [added.changed[nested][0]] and added.changed[nested][0].startswith("[+]")
    assert "AWS::SageMaker::InferenceComponent" in added.changed[nested][0] and EXTRA_ADAPTER in added.changed[nested][0]
    [parent_change] = added.changed[f"{DEV_STACK}.template.json"]
    assert parent_change.startswith("[~] AWS::CloudFormation::Stack") and shard in parent_change
    assert parent_change.endswith("{TemplateURL}"), "the shard's template reference is the parent's only change"

    removed = diff_assemblies(with_extra, cli_dev_assembly, DEV_STACK, tmp_path / "removed")
    assert [line.split()[0] for line in removed.changed[nested]] == ["[-]"]
    assert EXTRA_ADAPTER in removed.changed[nested][0]
    [parent_change] = removed.changed[f"{DEV_STACK}.template.json"]
    assert parent_change.startswith("[~] AWS::CloudFormation::Stack") and parent_change.endswith("{TemplateURL}")


def run_app(tmp_path: Path, context: dict) -> subprocess.CompletedProcess[str]:
    """app.py as the CLI runs it, with `context` and an output folder of its own."""
    env = dict(os.environ, CDK_OUTDIR=str(tmp_path / "out"), CDK_CONTEXT_JSON=json.dumps(context))
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env['PATH']}"
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "app.py")], env=env, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT
    )


def test_bad_environment_and_bad_manifest_fail_together_and_write_no_template(tmp_path):
    broken = {key: value for key, value in app_environments()["dev"].items() if key != "min_memory_required_in_mb"}
    manifest = write_manifest(
        tmp_path, extra_rows=[{"name": "bad_name", "source": "s3://example-ml-adapters/x/adapter.tar.gz"}], extra_locks={}
    )
    result = run_app(tmp_path, {"env": "dev", "environments": {"dev": broken}, "manifest": str(manifest)})
    assert result.returncode != 0
    assert "cannot synthesize environment 'dev'" in result.stderr
    assert "context.environments.dev.min_memory_required_in_mb: is required" in result.stderr
    assert "adapter 'bad_name'" in result.stderr and "name" in result.stderr
    assert "lock" in result.stderr  # the unlocked s3:// row is reported in the same run
    assert "Traceback" not in result.stderr  # the problems are the whole message
    assert not list((tmp_path / "out").glob("*.template.json"))


def test_bad_vllm_settings_name_the_construct_and_fields(tmp_path):
    broken = dict(app_environments()["dev"], vllm={"max_model_len": 0, "gpu_memory_utilization": 1.5})
    result = run_app(tmp_path, {"env": "dev", "environments": {"dev": broken}})
    assert result.returncode != 0
    assert "MultiAdapterEndpoint 'Adapters-dev/Serving'" in result.stderr
    assert "vllm.max_model_len" in result.stderr and "vllm.gpu_memory_utilization" in result.stderr
    assert not list((tmp_path / "out").glob("*.template.json"))


def test_unknown_environment_is_named(tmp_path):
    result = run_app(tmp_path, {"env": "staging", "environments": app_environments()})
    assert result.returncode != 0
    assert "context.environments.staging: is not defined (defined: dev, prod)" in result.stderr
    assert not list((tmp_path / "out").glob("*.template.json"))
