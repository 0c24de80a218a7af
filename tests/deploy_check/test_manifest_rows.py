"""A manifest row's ``check:``: parsed and refused like every other row field (adapter and field
named, every row's problems at once), and carried into the deploy check's custom resource."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template

from cdk_adapters.deploy_check.deploy_check import RESOURCE_TYPE, DeployCheck
from cdk_adapters.deploy_check.handler import index
from cdk_adapters.endpoint.components import ComputeRequirements
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.manifest import endpoint_from_manifest, load_manifest
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import DIGEST_IMAGE
from tests.fleet.builders import adapter_name, write_fleet_manifest
from tests.manifest.builders import s3_uri, write_manifest


def rows_with_checks(tmp_path, checks: dict[int, dict]):
    path = write_fleet_manifest(tmp_path, range(3))
    document = yaml.safe_load(path.read_text())
    for index_, check in checks.items():
        document["adapters"][index_]["check"] = check
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def synth(path, **props):
    stack = cdk.Stack(cdk.App(), "Manifest-Check")
    endpoint = endpoint_from_manifest(
        stack,
        "Serving",
        manifest=path,
        image=ContainerImage.from_digest_uri(DIGEST_IMAGE),
        compute=ComputeRequirements(min_memory_required_in_mb=16384),
        **props,
    )
    return stack, endpoint


def test_a_rows_check_reaches_the_handler_and_other_rows_use_the_default(tmp_path):
    path = rows_with_checks(tmp_path, {1: {"body": {"prompt": "Bonjour", "max_tokens": 4}, "expect_text": "jour"}})
    stack, _endpoint = synth(path, deploy_check=DeployCheck())
    [check] = Template.from_stack(stack).find_resources(RESOURCE_TYPE).values()
    properties = check["Properties"]
    assert sorted(properties["Adapters"]) == [adapter_name(i) for i in range(3)]
    targets = {t.adapter: t for t in index.targets(properties, sorted(properties["Adapters"]))}
    assert (
        targets[adapter_name(1)].body == {"prompt": "Bonjour", "max_tokens": 4} and targets[adapter_name(1)].expect_text == "jour"
    )
    assert targets[adapter_name(0)].body == {"prompt": "Hello", "max_tokens": 8, "temperature": 0}
    assert targets[adapter_name(0)].expect_text is None


def test_an_endpoint_without_the_deploy_check_ignores_the_rows_checks(tmp_path):
    path = rows_with_checks(tmp_path, {0: {"expect_text": "ok"}})
    stack, endpoint = synth(path)
    assert endpoint.deploy_check is None and Template.from_stack(stack).find_resources(RESOURCE_TYPE) == {}


def test_bad_checks_name_each_adapter_and_field_all_at_once(tmp_path):
    path = write_manifest(
        tmp_path,
        [
            {"name": "support-en-v1", "source": s3_uri("support-en-v1"), "check": {"body": {"model": "x", "stream": True}}},
            {"name": "support-de-v1", "source": s3_uri("support-de-v1"), "check": {"expect_json_keys": [], "expect": "x"}},
            {"name": "support-fr-v1", "source": s3_uri("support-fr-v1"), "check": {"expect_text": ""}},
        ],
    )
    with pytest.raises(ConfigurationError) as raised:
        load_manifest(path)
    found = sorted((p.subject, p.field) for p in raised.value.problems)
    assert found == [
        ("adapter 'support-de-v1'", "check.expect"),
        ("adapter 'support-de-v1'", "check.expect_json_keys"),
        ("adapter 'support-en-v1'", "check.body"),
        ("adapter 'support-fr-v1'", "check.expect_text"),
    ]
    [body] = [p for p in raised.value.problems if p.field == "check.body"]
    for words in ('needs "prompt"', "model: must be left out", "stream: must be false"):
        assert words in body.message, words
