"""A name whose component is the base component is refused: the base model is reached only by an
explicit ``base_model=True`` (issue 27, point 10).

The naming rule turns the adapter name ``base`` (any case) into ``<prefix>-base``, the base
component's name, so without this check ``invoke("base", ...)`` reached the base model while
skipping the ``base_model=True`` check and the record's ``allow_base_model``. botocore's Stubber
(tests/client/conftest.py) has no response queued in the refusing cases: any request sent would
fail the test, so "refused before anything is sent" is what each of them proves.
"""

from __future__ import annotations

import json
import random

import pytest

from cdk_adapters.client import AdapterClient, AdapterRequired
from cdk_adapters.contract.discovery import CanaryRecord, DiscoveryRecord
from tests.client.conftest import RECORD
from tests.client.test_client_stubbed import ANSWER, body_of, expected_call

ALLOWING = DiscoveryRecord("support-endpoint", "support-endpoint-base", "support-endpoint", allow_base_model=True)


def refusal(adapter: str, base: str = "support-endpoint-base", endpoint: str = "support-endpoint") -> str:
    return (
        f"{adapter!r} names the base model's component {base!r} of endpoint {endpoint!r}, not an adapter: "
        "calls never reach the base model under an adapter's name; pass base_model=True (and no adapter) "
        "for a deliberate base-model call"
    )


@pytest.mark.parametrize("record", [RECORD, ALLOWING], ids=["base-access-off", "base-access-on"])
@pytest.mark.parametrize("name", ["base", "BASE", "Base"])
def test_the_name_base_in_any_case_is_refused_before_anything_is_sent(runtime, record, name):
    client = AdapterClient.from_record(record, runtime=runtime)
    for call in (client.invoke, client.stream):
        with pytest.raises(AdapterRequired) as caught:
            call(name, "Hello")
        assert str(caught.value) == refusal(name)
    with pytest.raises(AdapterRequired) as caught:
        client.resolve(name)
    assert str(caught.value) == refusal(name)


def test_an_alias_whose_target_is_the_base_component_is_refused(runtime):
    """A record read from SSM is anyone's JSON: an alias to ``base`` must not reach the base either."""
    document = json.loads(ALLOWING.to_json())
    document["aliases"] = {"default": {"base": 100}}
    client = AdapterClient.from_record(DiscoveryRecord.from_json(json.dumps(document)), runtime=runtime)
    with pytest.raises(AdapterRequired) as caught:
        client.invoke("default", "Hello")
    assert str(caught.value) == refusal("default")


def test_the_base_component_is_compared_by_name_not_by_the_word_base(runtime):
    """A record from attributes may name its base component anything: an adapter name that the
    rule turns into that name is refused, and ``base`` is then an ordinary adapter name."""
    record = DiscoveryRecord("support-endpoint", "support-endpoint-shared-ic", "support-endpoint", allow_base_model=True)
    client = AdapterClient.from_record(record, runtime=runtime)
    with pytest.raises(AdapterRequired) as caught:
        client.invoke("Shared-IC", "Hello")
    assert str(caught.value) == refusal("Shared-IC", base="support-endpoint-shared-ic")
    runtime.stubber.add_response(
        "invoke_endpoint", {"Body": body_of(ANSWER)}, expected_call("support-endpoint-base", "/v1/completions", {"prompt": "x"})
    )
    assert client.invoke("base", "x").adapter == "base"


def test_a_base_component_spelled_with_capitals_is_still_the_base_component(runtime):
    """SageMaker compares component names ignoring case; the rule lower-cases the adapter name."""
    record = DiscoveryRecord("support-endpoint", "support-endpoint-Base", "support-endpoint", allow_base_model=True)
    with pytest.raises(AdapterRequired) as caught:
        AdapterClient.from_record(record, runtime=runtime).invoke("base", "Hello")
    assert str(caught.value) == refusal("base", base="support-endpoint-Base")


def test_the_canarys_base_component_is_refused_too(runtime):
    """The canary has its own prefix and base component; a name that reaches the canary's base
    (whatever share the coin gives it) is refused before the coin is thrown."""
    canary = CanaryRecord("support-canary", "support-canary-root", "support-canary", ("root",), 50)
    record = DiscoveryRecord(
        "support-endpoint", "support-endpoint-base", "support-endpoint", allow_base_model=True, canary=canary
    )
    client = AdapterClient.from_record(record, runtime=runtime, rng=random.Random(1))
    for _ in range(20):  # every throw of the coin: main or canary, never sent
        with pytest.raises(AdapterRequired) as caught:
            client.invoke("root", "Hello")
        assert str(caught.value) == refusal("root", base="support-canary-root", endpoint="support-canary")


def test_base_model_true_still_reaches_the_base_component_and_an_adapter_named_like_base_is_served(runtime):
    runtime.stubber.add_response(
        "invoke_endpoint", {"Body": body_of(ANSWER)}, expected_call("support-endpoint-base", "/v1/completions", {"prompt": "x"})
    )
    runtime.stubber.add_response(
        "invoke_endpoint",
        {"Body": body_of(ANSWER)},
        expected_call("support-endpoint-base-v1", "/v1/completions", {"prompt": "x"}),
    )
    client = AdapterClient.from_record(ALLOWING, runtime=runtime)
    assert client.invoke(None, "x", base_model=True).adapter is None
    assert client.invoke("base-v1", "x").adapter == "base-v1"
