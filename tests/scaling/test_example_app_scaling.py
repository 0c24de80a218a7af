"""The example app's environments: dev scales to zero, prod keeps at least two copies with target
tracking, the synth summary says so, and a malformed "copy_scaling" in cdk.json is refused by field."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest

import app as example_app
from cdk_adapters.cli import synth_summary
from cdk_adapters.hosting.scaling import WAKE_UP_QUERY
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import app_context


@pytest.fixture(scope="module")
def assemblies(tmp_path_factory) -> dict[str, Path]:
    """Each environment synthesized in-process (the nag packs included), as ``make synth`` would."""
    found = {}
    for name in ("dev", "prod"):
        outdir = tmp_path_factory.mktemp(name)
        context = dict(app_context(name), **{"aws:cdk:enable-asset-metadata": True})
        app = cdk.App(context=context, outdir=str(outdir))
        example_app.build(app)
        app.synth()
        found[name] = outdir
    return found


def summary_of(assembly: Path) -> synth_summary.AssemblySummary:
    summary = synth_summary.summarize(assembly)
    assert summary.ok, summary.errors + summary.violations
    return summary


def test_dev_scales_to_zero_and_says_how_it_wakes(assemblies):
    [stack] = summary_of(assemblies["dev"]).stacks
    base = next(line for line in stack.scaling if line.startswith("  copies of"))
    assert stack.scaling[0] == "  instances: ml.g6.2xlarge x 0..1, managed instance scaling (may scale to zero)"
    assert base.endswith(
        ": 0..1, target tracking SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution at 4; "
        f"scale to zero, wakes on >= 1 from Metrics Insights: {WAKE_UP_QUERY}"
    )


def test_prod_keeps_two_copies_with_target_tracking(assemblies):
    [stack] = summary_of(assemblies["prod"]).stacks
    assert stack.scaling[0] == (
        "  instances: pools ml.g6.2xlarge, then ml.g5.2xlarge x 2..8, managed instance scaling; "
        "waits up to 900 s for capacity before the next pool or failing"
    )
    [copies] = [line for line in stack.scaling if line.startswith("  copies of")]
    assert copies.endswith(": 2..8, target tracking SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution at 4")
    assert "scale to zero" not in copies


def test_the_summary_prints_each_environments_scaling(assemblies, capsys):
    for name in ("dev", "prod"):
        assert synth_summary.main([str(assemblies[name])]) == 0
    printed = capsys.readouterr().out
    assert printed.count("  scaling:\n") == 2
    assert "0..1, managed instance scaling (may scale to zero)" in printed and "2..8, managed instance scaling;" in printed
    assert "reserves, per pool: ml.g6.2xlarge 1 GPU(s), 24576 MiB; ml.g5.2xlarge 1 GPU(s), 24576 MiB" in printed


def test_a_malformed_copy_scaling_entry_is_refused_by_field():
    context = app_context("dev")
    context["environments"]["dev"]["copy_scaling"] = {"min_copies": 0, "max_copy": 1, "scale_to_zero": True}
    with pytest.raises(ConfigurationError) as caught:
        example_app.build(cdk.App(context=context))
    field = "context.environments.dev.copy_scaling"
    assert [(p.subject, p.field) for p in caught.value.problems] == [
        ("cdk.json", f"{field}.max_copy"),
        ("cdk.json", f"{field}.max_copies"),
        ("cdk.json", field),
    ]


def test_a_copy_ceiling_the_environments_instances_cannot_hold_is_refused():
    context = app_context("prod")
    context["environments"]["prod"]["copy_scaling"]["max_copies"] = 9  # 8 instances x 1 GPU = 8, on either pool
    with pytest.raises(ConfigurationError) as caught:
        example_app.build(cdk.App(context=context))
    [problem] = caught.value.problems
    assert problem.field == "max_copies" and "raise instances.max_count to 9 or lower max_copies to 8" in problem.message
    assert "the pool that holds fewest, a ml.g6.2xlarge, holds 1 copies" in problem.message
