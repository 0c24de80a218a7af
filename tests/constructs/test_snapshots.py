"""Template snapshots of the example app, one per environment (syrupy).

The serving image is an asset built from this repository, so its hash follows any change under
the build context; it is replaced by a placeholder here and its determinism is checked apart.
"""

from __future__ import annotations

import json
import re

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

import app as example_app
from tests.constructs.conftest import app_context, app_environments

ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def synth_environment(name: str) -> dict:
    app = cdk.App(context=app_context(name))
    stack = example_app.build(app)
    return Template.from_stack(stack).to_json()


@pytest.mark.parametrize("environment", sorted(app_environments()))
def test_environment_template_snapshot(environment, snapshot):
    template = synth_environment(environment)
    normalized = json.loads(ASSET_HASH.sub("<asset-hash>", json.dumps(template, sort_keys=True)))
    assert normalized == snapshot


def test_environments_differ_in_size_and_scaling():
    variants = {}
    for name in ("dev", "prod"):
        config = next(
            r for r in synth_environment(name)["Resources"].values() if r["Type"] == "AWS::SageMaker::EndpointConfig"
        )
        variants[name] = config["Properties"]["ProductionVariants"][0]
    assert variants["dev"]["InstanceType"] != variants["prod"]["InstanceType"]
    assert variants["dev"]["ManagedInstanceScaling"] != variants["prod"]["ManagedInstanceScaling"]
    assert variants["prod"]["InitialInstanceCount"] == 2


def test_serving_image_asset_hash_is_deterministic():
    def image_of(template: dict) -> str:
        model = next(r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Model")
        return json.dumps(model["Properties"]["PrimaryContainer"]["Image"])

    first, second = image_of(synth_environment("dev")), image_of(synth_environment("dev"))
    assert ASSET_HASH.search(first) and first == second
