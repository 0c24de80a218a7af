"""The discovery record: one JSON contract between the construct and every client.

Standard library only: these tests import no aws-cdk-lib (a client has boto3 alone).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter

import pytest

from cdk_adapters.contract.adapter_names import adapter_component_name
from cdk_adapters.contract.discovery import (
    RECORD_KIND,
    RECORD_VERSION,
    SERVING_TENANTS_VERSION,
    SERVING_VERSION,
    SERVING_VERSIONS_READ,
    DiscoveryRecord,
    DiscoveryRecordError,
    ServedBaseModel,
    ServingReference,
    alias_problems,
)

RECORD = DiscoveryRecord("fleet-1a2b3c4d", "fleet-1a2b3c4d-base", "fleet-1a2b3c4d", allow_base_model=False)


def test_round_trip_is_exact_and_rendering_is_stable():
    text = RECORD.to_json()
    assert DiscoveryRecord.from_json(text) == RECORD
    assert text == RECORD.to_json()  # same record, same text: no spurious SSM updates
    document = json.loads(text)
    assert document["kind"] == RECORD_KIND and document["version"] == RECORD_VERSION
    assert "aliases" not in document  # only written when there are aliases


@pytest.mark.parametrize("allow_base_model", [True, False])
def test_base_access_round_trips_both_ways_and_is_always_written(allow_base_model):
    """The decoder's default is False: a writer that dropped the key would still round-trip a False
    record, so both values are written and read back, and the key is in the text either way."""
    record = DiscoveryRecord("fleet-1a2b3c4d", "fleet-1a2b3c4d-base", "fleet-1a2b3c4d", allow_base_model=allow_base_model)
    text = record.to_json()
    assert json.loads(text)["allow_base_model"] is allow_base_model
    assert DiscoveryRecord.from_json(text).allow_base_model is allow_base_model
    assert DiscoveryRecord.from_json(text) == record


def test_a_record_written_without_the_base_access_key_keeps_the_base_closed():
    """Older writers left the key out: reading such a record never opens the base model."""
    document = json.loads(RECORD.to_json())
    del document["allow_base_model"]
    assert DiscoveryRecord.from_json(json.dumps(document)).allow_base_model is False


def test_the_rule_is_the_constructs_rule():
    for adapter in ("support-en-v1", "Support-EN-v1", "a" * 39):
        assert RECORD.component_name(adapter) == adapter_component_name(RECORD.component_prefix, adapter)
    assert RECORD.component_name("Support-EN-v1") == "fleet-1a2b3c4d-support-en-v1"


def test_one_record_of_fixed_size_names_the_component_of_any_number_of_adapters():
    text = RECORD.to_json()
    names = {RECORD.component_name(f"tenant-{index}-v1") for index in range(1000)}
    assert len(names) == 1000 and all(name.startswith(RECORD.component_prefix + "-tenant-") for name in names)
    assert RECORD.to_json() == text and len(text) < 300  # naming them added nothing to the record


def test_unknown_keys_are_ignored_within_a_version_and_other_versions_refused():
    document = json.loads(RECORD.to_json())
    assert DiscoveryRecord.from_json(json.dumps({**document, "added_later": {"x": 1}})) == RECORD
    with pytest.raises(DiscoveryRecordError, match="record version 2 is not 1"):
        DiscoveryRecord.from_json(json.dumps({**document, "version": 2}))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not JSON"),
        ('{"adapters": {}}', "not a cdk-adapters/discovery record"),
        (json.dumps({"kind": RECORD_KIND, "version": 1, "endpoint_name": ""}), "'endpoint_name' must be a non-empty string"),
        (
            json.dumps(
                {
                    "kind": RECORD_KIND,
                    "version": 1,
                    "endpoint_name": "e",
                    "base_inference_component_name": "b",
                    "component_prefix": "e",
                    "allow_base_model": "yes",
                }
            ),
            "'allow_base_model' must be true or false",
        ),
    ],
)
def test_malformed_records_say_what_is_wrong(text, message):
    with pytest.raises(DiscoveryRecordError, match=message):
        DiscoveryRecord.from_json(text)


def test_aliases_round_trip_and_resolve_by_weight():
    record = DiscoveryRecord("e", "e-base", "e", aliases={"support-en": {"support-en-v4": 90, "support-en-v5": 10}})
    assert DiscoveryRecord.from_json(record.to_json()) == record
    rng = random.Random(7)
    picks = Counter(record.resolve("Support-EN", rng) for _ in range(5000))
    assert set(picks) == {"support-en-v4", "support-en-v5"}
    assert 0.08 < picks["support-en-v5"] / 5000 < 0.12
    assert record.resolve("support-de-v1") == "support-de-v1"  # not an alias: an adapter name


def test_alias_rules():
    adapters = ["support-en-v4", "support-en-v5", "billing-v1"]
    found = alias_problems(
        {
            "ok": {"support-en-v4": 100},
            "sum": {"support-en-v4": 60, "support-en-v5": 30},
            "zero": {"support-en-v4": 0, "support-en-v5": 100},
            "unknown": {"support-en-v9": 100},
            "Billing-V1": {"support-en-v4": 100},
            "empty": {},
        },
        adapters,
    )
    by_alias = dict(found)
    assert set(by_alias) == {"sum", "zero", "unknown", "Billing-V1", "empty"}
    assert "sum to 100, got 90" in by_alias["sum"]
    assert "integers from 1 to 100" in by_alias["zero"]
    assert "'support-en-v9'" in by_alias["unknown"]
    assert "shadows the adapter" in by_alias["Billing-V1"]


def test_importing_the_contract_needs_no_aws_cdk_lib():
    probe = "import sys, cdk_adapters.contract.discovery; print('aws_cdk' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr


SERVING = ServingReference(
    base_model=ServedBaseModel("org/base", "abc123", 64, ("k_proj", "q_proj"), False, (("k_proj", 32, 64), ("q_proj", 64, 64))),
    max_lora_rank=16,
    adapter_locations=("s3://adapters/team/",),
)


def test_the_serving_reference_round_trips_and_older_records_without_it_still_parse():
    with_serving = DiscoveryRecord(**{**RECORD.__dict__, "serving": SERVING})
    text = with_serving.to_json()
    assert DiscoveryRecord.from_json(text) == with_serving
    assert json.loads(text)["serving"]["version"] == SERVING_VERSION
    assert DiscoveryRecord.from_json(RECORD.to_json()).serving is None  # a record written before the key existed


def test_a_serving_reference_of_another_version_is_left_out_not_refused():
    document = json.loads(DiscoveryRecord(**{**RECORD.__dict__, "serving": SERVING}).to_json())
    document["serving"]["version"] = max(SERVING_VERSIONS_READ) + 1
    assert DiscoveryRecord.from_json(json.dumps(document)) == RECORD  # a client needs none of it


TENANTS = ServingReference(
    base_model=None,
    max_lora_rank=16,
    adapter_locations=("s3://adapters/", "s3://adapters/acme/", "s3://adapters/beta/", "s3://beta-extra/"),
    tenant_locations=(("acme", "s3://adapters/acme/"), ("beta", "s3://adapters/beta/"), ("beta", "s3://beta-extra/")),
)


def test_tenant_assignments_round_trip_as_serving_version_2():
    record = DiscoveryRecord(**{**RECORD.__dict__, "serving": TENANTS})
    document = json.loads(record.to_json())
    assert document["serving"]["version"] == SERVING_TENANTS_VERSION == 2
    assert document["serving"]["tenants"] == {
        "acme": ["s3://adapters/acme/"],
        "beta": ["s3://adapters/beta/", "s3://beta-extra/"],
    }
    assert DiscoveryRecord.from_json(record.to_json()) == record
    assert TENANTS.tenants == ("acme", "beta") and TENANTS.tenant_of("BETA") == "beta" and TENANTS.tenant_of("gamma") is None
    assert TENANTS.locations_of("beta") == ("s3://adapters/beta/", "s3://beta-extra/")


def test_a_record_without_tenant_assignments_is_written_exactly_as_before():
    """Version 1 and no ``tenants`` key: the text of every existing platform's record is unchanged."""
    document = json.loads(DiscoveryRecord(**{**RECORD.__dict__, "serving": SERVING}).to_json())
    assert document["serving"]["version"] == SERVING_VERSION == 1
    assert sorted(document["serving"]) == ["adapter_locations", "allow_vision_modules", "base_model", "max_lora_rank", "version"]


def test_a_reader_from_before_tenants_reads_an_assigning_record_without_its_serving_reference(monkeypatch):
    """What an older cdk-adapters does with a record that assigns tenants: it reads serving
    version 1 only, so it drops the whole reference (locations too), and its tenant imports refuse
    published adapters as outside every location instead of ignoring the assignment."""
    import cdk_adapters.contract.discovery as discovery

    text = DiscoveryRecord(**{**RECORD.__dict__, "serving": TENANTS}).to_json()
    monkeypatch.setattr(discovery, "SERVING_VERSIONS_READ", (SERVING_VERSION,))  # the reader before this release
    assert DiscoveryRecord.from_json(text) == RECORD


def test_the_most_specific_assigned_location_owns_an_object():
    assert TENANTS.owner_of("adapters", "acme/acme-v1/adapter.tar.gz") == ("acme", "s3://adapters/acme/")
    assert TENANTS.owner_of("adapters", "beta/beta-v1/adapter.tar.gz") == ("beta", "s3://adapters/beta/")
    assert TENANTS.owner_of("beta-extra", "x/adapter.tar.gz") == ("beta", "s3://beta-extra/")
    assert TENANTS.owner_of("adapters", "acme-old/adapter.tar.gz") is None  # a prefix is a folder, not a string start
    assert TENANTS.owner_of("adapters", "platform-v1/adapter.tar.gz") is None  # the platform's own location
    nested = ServingReference(
        None,
        16,
        adapter_locations=("s3://bkt/", "s3://bkt/beta/"),
        tenant_locations=(("acme", "s3://bkt/"), ("beta", "s3://bkt/beta/")),
    )
    assert nested.owner_of("bkt", "beta/beta-v1/adapter.tar.gz") == ("beta", "s3://bkt/beta/")
    assert nested.owner_of("bkt", "acme-v1/adapter.tar.gz") == ("acme", "s3://bkt/")


@pytest.mark.parametrize(
    ("tenants", "message"),
    [
        (None, "serving.tenants must map each tenant to a non-empty list of its adapter locations"),
        ({"acme": []}, "serving.tenants.acme: must be a non-empty list of s3:// URLs"),
        ({"acme": ["s3://elsewhere/"]}, "serving.tenants.acme: 's3://elsewhere/' is not one of serving.adapter_locations"),
        ({"ac me": ["s3://adapters/acme/"]}, "serving.tenants: tenant 'ac me' must be 1 to 63 letters, digits and inner hyphens"),
        ({"acme": ["s3://adapters/acme/"], "ACME": ["s3://adapters/beta/"]}, "tenant 'ACME' is listed twice"),
        (
            {"acme": ["s3://adapters/acme/"], "beta": ["s3://adapters/acme/"]},
            "serving.tenants: 's3://adapters/acme/' is assigned to 2 tenants ('acme', 'beta'); a location has one",
        ),
    ],
)
def test_malformed_tenant_assignments_say_what_is_wrong(tenants, message):
    document = json.loads(DiscoveryRecord(**{**RECORD.__dict__, "serving": TENANTS}).to_json())
    if tenants is None:
        del document["serving"]["tenants"]
    else:
        document["serving"]["tenants"] = tenants
    with pytest.raises(DiscoveryRecordError) as caught:
        DiscoveryRecord.from_json(json.dumps(document))
    assert message in str(caught.value)


def test_a_tenants_key_in_serving_version_1_is_ignored():
    document = json.loads(DiscoveryRecord(**{**RECORD.__dict__, "serving": SERVING}).to_json())
    document["serving"]["tenants"] = {"acme": ["s3://adapters/team/"]}
    assert DiscoveryRecord.from_json(json.dumps(document)).serving == SERVING


def test_the_record_size_grows_with_tenants_never_with_adapters():
    record = DiscoveryRecord(**{**RECORD.__dict__, "serving": TENANTS})
    text = record.to_json()
    names = {record.component_name(f"acme-{index}-v1") for index in range(1000)}
    assert len(names) == 1000 and record.to_json() == text
    more = ServingReference(
        None,
        16,
        adapter_locations=(*TENANTS.adapter_locations, "s3://adapters/gamma/"),
        tenant_locations=(*TENANTS.tenant_locations, ("gamma", "s3://adapters/gamma/")),
    )
    assert len(DiscoveryRecord(**{**RECORD.__dict__, "serving": more}).to_json()) > len(text)


def test_a_malformed_serving_reference_names_every_field():
    document = json.loads(RECORD.to_json())
    document["serving"] = {
        "version": SERVING_VERSION,
        "max_lora_rank": 0,
        "adapter_locations": ["http://x"],
        "base_model": {"hidden_size": -1, "module_names": []},
    }
    with pytest.raises(DiscoveryRecordError) as caught:
        DiscoveryRecord.from_json(json.dumps(document))
    for field in (
        "serving.max_lora_rank",
        "serving.adapter_locations",
        "serving.base_model.hidden_size",
        "serving.base_model.module_names",
    ):
        assert field in str(caught.value)


def test_a_serving_references_locations_are_read_by_the_one_s3_url_parser():
    document = json.loads(DiscoveryRecord(**{**RECORD.__dict__, "serving": SERVING}).to_json())
    document["serving"]["adapter_locations"] = ["s3://adapters/team/", "s3://Team_Bucket/adapters/", "s3://"]
    with pytest.raises(DiscoveryRecordError) as caught:
        DiscoveryRecord.from_json(json.dumps(document))
    assert "serving.adapter_locations: 's3://Team_Bucket/adapters/': bucket 'Team_Bucket' may hold only lower-case" in str(
        caught.value
    )
    assert "serving.adapter_locations: 's3://' names no bucket" in str(caught.value)
    assert "'s3://adapters/team/'" not in str(caught.value)
