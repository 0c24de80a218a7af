"""The example app as a service of two cells, through the real CDK CLI (``make synth CELLS=2``
runs this synth): every template passes cfn-lint and the nag packs, the summary shows both cells
and the service record, and the record sends each manifest row to the cell whose templates hold
its component.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from cdk_adapters.cli import synth_summary
from cdk_adapters.contract.service_record import ServiceRecord
from tests.constructs.conftest import REPO_ROOT, VENV_BIN, app_environments, run_cdk

pytestmark = pytest.mark.cdk_cli

STACK = app_environments()["dev"]["stack_name"]


@pytest.fixture(scope="module")
def two_cell_assembly(tmp_path_factory) -> Path:
    outdir = tmp_path_factory.mktemp("cells") / "cdk.out"
    result = run_cdk("synth", "--quiet", "-c", "cells=2", "--output", str(outdir))
    assert result.returncode == 0, f"cdk synth -c cells=2 failed:\n{result.stdout}\n{result.stderr}"
    return outdir


def test_two_cells_synthesize_clean_templates_and_the_summary_shows_both(two_cell_assembly, capsys):
    templates = sorted(two_cell_assembly.glob("*.template.json"))
    top = {path.name for path in templates if ".nested." not in path.name}
    assert len(top) == 3  # two cells and the service record's stack
    lint = subprocess.run([str(VENV_BIN / "cfn-lint"), *map(str, templates)], capture_output=True, text=True, timeout=600)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    report = json.loads((two_cell_assembly / synth_summary.VALIDATION_REPORT).read_text())
    assert [p for p in report["pluginReports"] if p.get("conclusion") == "failure"] == []
    assert synth_summary.main([str(two_cell_assembly)]) == 0
    printed = capsys.readouterr().out
    assert f"stack {STACK}/Cell0:" in printed and f"stack {STACK}/Cell1:" in printed
    assert f"service record /cdk-adapters/{STACK}/service: 2 cells (cell-0 -> endpoint " in printed


def test_the_service_record_sends_every_manifest_row_to_the_cell_that_holds_it(two_cell_assembly):
    held: dict[str, set[str]] = {}
    record = None
    for path in two_cell_assembly.glob("*.template.json"):
        resources = json.loads(path.read_text())["Resources"].values()
        for resource in resources:
            properties = resource.get("Properties", {})
            if (
                resource["Type"] == "AWS::SageMaker::InferenceComponent"
                and "BaseInferenceComponentName" in properties["Specification"]
            ):
                held.setdefault(properties["Specification"]["BaseInferenceComponentName"], set()).add(
                    properties["InferenceComponentName"]
                )
            if resource["Type"] == "AWS::SSM::Parameter" and str(properties.get("Name", "")).endswith("/service"):
                record = ServiceRecord.from_json(properties["Value"])
    assert record is not None and len(record.cells) == 2
    rows = [row["name"] for row in yaml.safe_load((REPO_ROOT / "manifests" / "example.yaml").read_text())["adapters"]]
    for name in rows:
        cell = record.record_of(name)
        assert cell.component_name(name) in held[cell.base_inference_component_name]
    assert sum(len(names) for names in held.values()) == len(rows)
