"""Aliases on the construct: published in the discovery record, checked against the adapters at synth."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import build_endpoint
from tests.support.synth_refusal import refused_at_synth

URL = "s3://example-adapters/{}/adapter.tar.gz"


def endpoint_with(*adapters: str, **props):
    endpoint = build_endpoint(**props)
    for name in adapters:
        endpoint.add_adapter(name, artifact=AdapterArtifact.from_s3_url(URL.format(name)))
    return endpoint


def record_of(endpoint) -> DiscoveryRecord:
    parameter = next(iter(Template.from_stack(cdk.Stack.of(endpoint)).find_resources("AWS::SSM::Parameter").values()))
    return DiscoveryRecord.from_json(parameter["Properties"]["Value"])


def test_add_alias_publishes_one_target_or_weights_in_the_record():
    endpoint = endpoint_with("support-en-v4", "support-en-v5")
    endpoint.add_alias("support-en", "support-en-v4")
    endpoint.add_alias("support-en-canary", {"support-en-v4": 90, "support-en-v5": 10})
    assert record_of(endpoint).aliases == {
        "support-en": {"support-en-v4": 100},
        "support-en-canary": {"support-en-v4": 90, "support-en-v5": 10},
    }


def test_an_alias_may_be_added_before_its_targets():
    endpoint = build_endpoint()
    endpoint.add_alias("support-en", "support-en-v4")
    endpoint.add_adapter("support-en-v4", artifact=AdapterArtifact.from_s3_url(URL.format("support-en-v4")))
    assert record_of(endpoint).resolve("support-en") == "support-en-v4"


@pytest.mark.parametrize(
    ("alias", "targets", "field", "text"),
    [
        ("support-en", {"support-en-v4": 50, "support-en-v5": 40}, "targets", "sum to 100, got 90"),
        ("support-en", {"support-en-v4": 101}, "targets", "integers from 1 to 100"),
        ("bad_alias", "support-en-v4", "name", "must match"),
    ],
)
def test_bad_aliases_are_refused_at_once(alias, targets, field, text):
    endpoint = endpoint_with("support-en-v4", "support-en-v5")
    with pytest.raises(ConfigurationError) as caught:
        endpoint.add_alias(alias, targets)
    [problem] = caught.value.problems
    assert problem.subject == f"alias {alias!r} of MultiAdapterEndpoint 'Test-Stack/Serving'" and problem.field == field
    assert text in problem.message
    assert endpoint.aliases == {}


@pytest.mark.parametrize(
    ("alias", "targets", "text"),
    [
        ("support-en", "support-en-v9", "targets 'support-en-v9', which is not an adapter of this endpoint"),
        ("Support-EN-v4", "support-en-v5", "shadows the adapter of the same name"),
    ],
)
def test_aliases_that_do_not_fit_the_adapters_fail_synth(alias, targets, text, tmp_path):
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Test-Stack")
    endpoint = build_endpoint(stack)
    for name in ("support-en-v4", "support-en-v5"):
        endpoint.add_adapter(name, artifact=AdapterArtifact.from_s3_url(URL.format(name)))
    endpoint.add_alias(alias, targets)
    with refused_at_synth(text, construct=endpoint.node.path):
        app.synth()
    assert not list(tmp_path.glob("*.template.json"))
