"""The owned endpoint and an import of it refuse the same adapter for the same reasons: both run
one `add_adapter` sequence (`cdk_adapters.endpoint.adapter_checks`)."""

import pytest

from cdk_adapters import AdapterArtifact, AdapterCheck, MultiAdapterEndpoint
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import ADAPTER_BUCKET_URL, build_endpoint, new_stack

PUBLISHED = f"{ADAPTER_BUCKET_URL.rstrip('/')}/support-en-v1/adapter.tar.gz"
OUTSIDE = "s3://another-teams-bucket/support-en-v1/adapter.tar.gz"


def both_endpoints():
    owned = build_endpoint()
    imported = MultiAdapterEndpoint.from_endpoint_attributes(
        new_stack("Tenant-Stack"),
        "Serving",
        endpoint_name=owned.endpoint_name,
        base_component_name=owned.base_component_name,
        component_prefix=owned.component_prefix,
        serving_reference=owned.discovery_record().serving,
    )
    for endpoint in (owned, imported):
        endpoint.add_adapter("taken-v1", artifact=AdapterArtifact.from_s3_url(PUBLISHED))
    return owned, imported


def refusal(endpoint, name, artifact, **extra) -> list[tuple[str, str]]:
    with pytest.raises(ConfigurationError) as raised:
        endpoint.add_adapter(name, artifact=artifact, **extra)
    return [(problem.field, problem.message) for problem in raised.value.problems]


BAD_ADDS = {
    "no version suffix": ("support", AdapterArtifact.from_s3_url(PUBLISHED), {}),
    "not a SageMaker name": ("support_en-v1", AdapterArtifact.from_s3_url(PUBLISHED), {}),
    "added already, in other case": ("TAKEN-v1", AdapterArtifact.from_s3_url(PUBLISHED), {}),
    "check of the wrong type": ("support-en-v1", AdapterArtifact.from_s3_url(PUBLISHED), {"check": {"prompt": "hi"}}),
    "a check without a deploy check": ("support-en-v1", AdapterArtifact.from_s3_url(PUBLISHED), {"check": AdapterCheck()}),
}


@pytest.mark.parametrize("case", sorted(BAD_ADDS))
def test_both_endpoints_refuse_a_bad_adapter_with_the_same_fields(case):
    owned, imported = both_endpoints()
    name, artifact, extra = BAD_ADDS[case]
    mine, theirs = refusal(owned, name, artifact, **extra), refusal(imported, name, artifact, **extra)
    assert [field for field, _ in mine] == [field for field, _ in theirs] != []
    if case != "a check without a deploy check":  # each names its own way to add a deploy check
        assert mine == theirs


def test_an_archive_outside_every_location_is_refused_by_both_naming_the_field():
    owned, imported = both_endpoints()
    outside = AdapterArtifact.from_s3_url(OUTSIDE)
    mine, theirs = refusal(owned, "support-en-v1", outside), refusal(imported, "support-en-v1", outside)
    assert [field for field, _ in mine] == [field for field, _ in theirs] == ["artifact.url"]
    assert all(OUTSIDE in message and "outside every adapter location" in message for _, message in mine + theirs)
