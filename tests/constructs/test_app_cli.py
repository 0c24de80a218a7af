"""The example app through the real CDK CLI: synth, cfn-lint, summary, and stable logical IDs via cdk diff.

CLI runs are few and shared (session fixture); property checks live in the in-process tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cdk_adapters import synth_summary
from tests.constructs.conftest import REPO_ROOT, VENV_BIN, app_environments, run_cdk

pytestmark = pytest.mark.cdk_cli

DEV_STACK = app_environments()["dev"]["stack_name"]
EXTRA_ADAPTER = "support-fr-v1"

VARIANT_APP = '''
import copy, sys
import aws_cdk as cdk
sys.path.insert(0, {root!r})
from app import build

app = cdk.App()
extra = app.node.try_get_context("extra_adapter")
if extra:
    environments = copy.deepcopy(app.node.try_get_context("environments"))
    environments["dev"]["adapters"].append({{"name": extra, "s3_url": f"s3://example-ml-adapters/{{extra}}/v1/adapter.tar.gz"}})
    app.node.set_context("environments", environments)
build(app)
app.synth()
'''


def test_cli_synth_of_default_environment_is_clean(cli_dev_assembly: Path, capsys):
    template_path = cli_dev_assembly / f"{DEV_STACK}.template.json"
    template = json.loads(template_path.read_text())
    types = [r["Type"] for r in template["Resources"].values()]
    assert types.count("AWS::SageMaker::InferenceComponent") == 1 + len(app_environments()["dev"]["adapters"])
    assert "Parameters" not in template or set(template["Parameters"]) == {"BootstrapVersion"}
    lint = subprocess.run([str(VENV_BIN / "cfn-lint"), str(template_path)], capture_output=True, text=True, timeout=600)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert synth_summary.main([str(cli_dev_assembly)]) == 0
    printed = capsys.readouterr().out
    assert f"stack {DEV_STACK}:" in printed and "adapters (2)" in printed and "no unacknowledged findings" in printed
    report = cli_dev_assembly / synth_summary.VALIDATION_REPORT
    if report.exists():
        assert all(p.get("conclusion") != "failure" for p in json.loads(report.read_text())["pluginReports"])


@pytest.fixture(scope="module")
def variant_app(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("variant") / "variant_app.py"
    path.write_text(VARIANT_APP.format(root=str(REPO_ROOT)))
    return f"{VENV_BIN / 'python'} {path}"


def diff_lines(output: str) -> list[str]:
    """The change lines of ``cdk diff`` ([+] added, [-] removed, [~] modified)."""
    return [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", output).splitlines() if re.match(r"^\s*\[[+~-]\]", line)]


def test_adding_then_removing_an_adapter_touches_no_other_resource(cli_dev_assembly: Path, variant_app: str, tmp_path):
    before = cli_dev_assembly / f"{DEV_STACK}.template.json"
    added = run_cdk("diff", "--app", variant_app, "-c", f"extra_adapter={EXTRA_ADAPTER}", "--template", str(before), DEV_STACK)
    assert added.returncode == 0, added.stdout + added.stderr
    lines = diff_lines(added.stdout + added.stderr)
    additions = [line for line in lines if line.startswith("[+]")]
    changes = [line for line in lines if line.startswith("[~]")]
    assert [line for line in lines if line.startswith("[-]")] == []
    assert any("AWS::SageMaker::InferenceComponent" in line and "supportfrv1" in line for line in additions), lines
    assert any("AWS::IAM::Policy" in line and "supportfrv1" in line for line in additions), lines
    assert len(additions) == 2, lines
    # Only the discovery record may change: the SSM parameter's value and the adapter map output.
    assert len(changes) == 2, lines
    assert any("AWS::SSM::Parameter" in line for line in changes), lines
    assert any("Output" in line and "AdapterInferenceComponents" in line for line in changes), lines

    with_extra = tmp_path / "with-extra"
    synth = run_cdk("synth", "--app", variant_app, "-c", f"extra_adapter={EXTRA_ADAPTER}", "--quiet", "--output", str(with_extra))
    assert synth.returncode == 0, synth.stdout + synth.stderr
    removed = run_cdk("diff", "--app", variant_app, "--template", str(with_extra / f"{DEV_STACK}.template.json"), DEV_STACK)
    lines = diff_lines(removed.stdout + removed.stderr)
    assert sorted(line.split()[0] for line in lines) == ["[-]", "[-]", "[~]", "[~]"], lines
    assert all("supportfrv1" in line for line in lines if line.startswith("[-]")), lines


def test_bad_environment_fails_with_every_problem_and_writes_no_template(tmp_path):
    environments = app_environments()
    broken = dict(environments["dev"])
    broken["vllm"] = {"max_loras": 8, "max_cpu_loras": 2, "max_lora_rank": 24}
    broken["adapters"] = [{"name": "bad_name", "s3_url": "s3://example-ml-adapters/x/v1/adapter.tar.gz"}]
    env = dict(os.environ)
    env["CDK_OUTDIR"] = str(tmp_path)
    env["CDK_CONTEXT_JSON"] = json.dumps({"env": "dev", "environments": {"dev": broken}})
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env['PATH']}"
    result = subprocess.run([sys.executable, str(REPO_ROOT / "app.py")], env=env, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert result.returncode != 0
    assert "vllm.max_lora_rank" in result.stderr and "vllm.max_cpu_loras" in result.stderr
    assert "MultiAdapterEndpoint 'Adapters-dev/Serving'" in result.stderr
    assert list(tmp_path.glob("*.template.json")) == []


def test_unknown_environment_is_named(tmp_path):
    env = dict(os.environ, CDK_OUTDIR=str(tmp_path), CDK_CONTEXT_JSON=json.dumps({"env": "staging", "environments": app_environments()}))
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env['PATH']}"
    result = subprocess.run([sys.executable, str(REPO_ROOT / "app.py")], env=env, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert result.returncode != 0
    assert "context.environments.staging: is not defined (defined: dev, prod)" in result.stderr
    assert list(tmp_path.glob("*.template.json")) == []
