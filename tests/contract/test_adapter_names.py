"""Adapter names compare by one key on every side: the construct, the gate, the discovery record
a client reads, and the limits the container enforces."""

from __future__ import annotations

from cdk_adapters.contract import tenant_limits
from cdk_adapters.contract.adapter_names import adapter_component_name, adapter_name_key, duplicate_adapter_names
from cdk_adapters.contract.discovery import CanaryRecord, DiscoveryRecord, alias_problems
from cdk_adapters.contract.tenant_limits import AdapterLimits
from cdk_adapters.gate.checks.co_hosted import _suggested

SPELLINGS = ("Support-EN-v1", "support-en-v1", "SUPPORT-EN-V1")


def test_every_spelling_is_one_key_and_one_component():
    assert len({adapter_name_key(name) for name in SPELLINGS}) == 1
    assert {adapter_component_name("ep-1234abcd", name) for name in SPELLINGS} == {"ep-1234abcd-support-en-v1"}
    assert [(p.subject, p.field) for p in duplicate_adapter_names(SPELLINGS)] == [("adapter 'Support-EN-v1'", "name")]


def test_the_record_a_client_reads_compares_by_the_key():
    canary = CanaryRecord("canary", "canary-base", "canary-1234abcd", adapters=("Support-EN-v1",), traffic_percent=10)
    assert all(canary.serves(name) for name in SPELLINGS)
    record = DiscoveryRecord("ep", "ep-base", "ep-1234abcd", aliases={"Support": {"support-en-v1": 100}})
    assert record.resolve("SUPPORT") == "support-en-v1"
    assert alias_problems({"SUPPORT-EN-V1": {"Support-EN-v1": 100}}, adapters=["support-en-v1"]) == [
        ("SUPPORT-EN-V1", "shadows the adapter of the same name; pick an alias name no adapter has")
    ]


def test_the_container_finds_an_adapters_limits_by_the_key():
    env = tenant_limits.environment(adapters={"Support-EN-v1": AdapterLimits(weight=2.0)})
    decoded, problems = tenant_limits.decode(env)
    assert problems == []
    assert {decoded.for_adapter(name).weight for name in SPELLINGS} == {2.0}


def test_the_gates_suggestion_skips_a_name_taken_in_another_case():
    assert _suggested("support", {adapter_name_key("Support-V1")}) == "support-v2"
