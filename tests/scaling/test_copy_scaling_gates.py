"""Scaled endpoints pass the gates: cfn-lint with no error, cdk-nag's three packs with nothing unacknowledged."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from cdk_adapters.hosting.scaling import WakeUpScope
from tests.constructs.test_nag_lint_composition import CFN_LINT_ERROR, cfn_lint, nag_violations
from tests.scaling.conftest import scaled_out, scaled_to_zero

SHAPES = {
    "scale-to-zero": lambda: scaled_to_zero("Gate-Zero"),
    "scale-to-zero-base-scope": lambda: scaled_to_zero("Gate-Zero-Base", scope=WakeUpScope.BASE_COMPONENT),
    "scale-out": lambda: scaled_out("Gate-Out"),
}


@pytest.fixture(scope="module")
def stacks() -> dict[str, cdk.Stack]:
    return {name: cdk.Stack.of(build()) for name, build in SHAPES.items()}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_three_nag_packs_find_nothing_unacknowledged(stacks, shape):
    assert nag_violations(stacks[shape]) == []


def test_cfn_lint_finds_no_error(stacks, tmp_path):
    paths = []
    for name, stack in stacks.items():
        path = tmp_path / f"{name}.template.json"
        path.write_text(json.dumps(Template.from_stack(stack).to_json()))
        paths.append(path)
    lint = cfn_lint(paths)
    assert lint.returncode & CFN_LINT_ERROR == 0, lint.stdout + lint.stderr
