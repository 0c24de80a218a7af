"""The platform assigns adapter locations to tenants; a tenant's synth refuses another tenant's archive
(issue 27, point 5).

The platform's role reads every object under every adapter location, so before this a tenant
stack could synthesize a component whose ``ArtifactUrl`` is another tenant's published archive.
Now ``AdapterLocation(..., tenant=...)`` assigns a prefix to a tenant, the discovery record's
serving reference carries the assignment, an import names its tenant, and `add_adapter` refuses
a published archive unless the most specific assigned location holding it is the tenant's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.contract.discovery import DiscoveryRecord, ServingReference
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from cdk_adapters.endpoint.imported import ImportedMultiAdapterEndpoint
from cdk_adapters.private.nag_acknowledgments import flatten_reference
from cdk_adapters.problems import ConfigurationError, Problem
from tests.constructs.conftest import ADAPTER_BUCKET_URL, build_endpoint
from tests.tenancy.test_tenant_app import ENV, lookup_key, published_record, synth_templates, tenant_stack

ACME = "s3://tenant-adapters/acme/"
GLOBEX = "s3://tenant-adapters/globex/"
IMPORT = "imported MultiAdapterEndpoint 'Tenant-Acme/Serving'"


def platform_with_tenants(outdir: Path) -> tuple[MultiAdapterEndpoint, str, dict]:
    """The platform's app: its own location (no tenant) and one prefix each for acme and globex."""
    app = cdk.App(outdir=str(outdir))
    endpoint = build_endpoint(
        cdk.Stack(app, "Platform", env=ENV),
        adapter_locations=[
            AdapterLocation.from_s3_url(ADAPTER_BUCKET_URL),
            AdapterLocation.from_s3_url(ACME, tenant="acme"),
            AdapterLocation.from_s3_url(GLOBEX, tenant="globex"),
        ],
    )
    endpoint.add_adapter("platform-v1", artifact=AdapterArtifact.from_s3_url(f"{ADAPTER_BUCKET_URL}platform-v1/adapter.tar.gz"))
    endpoint.add_alias("platform", "platform-v1")
    template = synth_templates(app)["Platform"]
    return endpoint, published_record(template), template


@pytest.fixture(scope="module")
def assigning(tmp_path_factory):
    return platform_with_tenants(tmp_path_factory.mktemp("platform"))


def tenant_import(record_text: str, *, tenant: str | None = "acme", **options) -> ImportedMultiAdapterEndpoint:
    return ImportedMultiAdapterEndpoint(
        tenant_stack(cdk.App()), "Serving", record=DiscoveryRecord.from_json(record_text), tenant=tenant, **options
    )


def refused(imported: ImportedMultiAdapterEndpoint, name: str, url: str) -> tuple[Problem, ...]:
    with pytest.raises(ConfigurationError) as caught:
        imported.add_adapter(name, artifact=AdapterArtifact.from_s3_url(url))
    assert imported.adapters == {}, "a refused adapter leaves nothing behind"
    assert Template.from_stack(cdk.Stack.of(imported)).find_resources("AWS::SageMaker::InferenceComponent") == {}
    return caught.value.problems


def rule_message(url: str, where: str, tenant: str = "acme", allowed: str = ACME) -> str:
    return (
        f"{url} breaks the tenant-location rule: tenant {tenant!r} may serve adapters only from its own prefix "
        f"({allowed}), and this archive lies {where}; publish it under {allowed.split(', ')[0]}"
    )


def test_the_platform_publishes_each_tenants_prefix_and_its_role_reads_every_location(assigning):
    _endpoint, text, template = assigning
    serving = DiscoveryRecord.from_json(text).serving
    assert serving.tenant_locations == (("acme", ACME), ("globex", GLOBEX))
    assert serving.adapter_locations == (ADAPTER_BUCKET_URL, ACME, GLOBEX)
    assert json.loads(text)["serving"]["version"] == 2
    reads = sorted(
        flatten_reference(statement["Resource"]).replace("<Ref:", "<")
        for policy in template["Resources"].values()
        if policy["Type"] == "AWS::IAM::Policy"
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Action"] == "s3:GetObject"
    )
    # The assignment changes no grant: one read per location, as before (not an IAM boundary), beside the model's.
    assert reads == [
        f"arn:<AWS::Partition>:s3:::{prefix}*"
        for prefix in ("example-adapters/", "example-models/base/tiny-llama/", "tenant-adapters/acme/", "tenant-adapters/globex/")
    ]


def test_a_tenant_adapter_under_another_tenants_prefix_is_refused_at_the_tenants_synth(assigning):
    _, text, _ = assigning
    imported = tenant_import(text)
    url = f"{GLOBEX}globex-chat-v1/adapter.tar.gz"
    assert refused(imported, "acme-chat-v1", url) == (
        Problem(
            f"adapter 'acme-chat-v1' of {IMPORT}",
            "artifact.url",
            rule_message(url, f"under {GLOBEX}, the prefix the platform assigned to tenant 'globex'"),
        ),
    )


def test_a_tenant_adapter_under_the_platforms_own_location_is_refused(assigning):
    _, text, _ = assigning
    url = f"{ADAPTER_BUCKET_URL}platform-v1/adapter.tar.gz"
    assert refused(tenant_import(text), "acme-chat-v1", url) == (
        Problem(f"adapter 'acme-chat-v1' of {IMPORT}", "artifact.url", rule_message(url, "under none of them")),
    )


def test_a_tenant_adapter_under_its_own_prefix_is_served(assigning):
    endpoint, text, _ = assigning
    imported = tenant_import(text, tenant="ACME")  # tenant names compare ignoring case; the platform's spelling is kept
    assert imported.tenant == "acme"
    url = f"{ACME}acme-chat-v1/adapter.tar.gz"
    imported.add_adapter("acme-chat-v1", artifact=AdapterArtifact.from_s3_url(url))
    [component] = Template.from_stack(cdk.Stack.of(imported)).find_resources("AWS::SageMaker::InferenceComponent").values()
    assert component["Properties"]["InferenceComponentName"] == f"{endpoint.prefix}-acme-chat-v1"
    assert component["Properties"]["Specification"]["Container"] == {"ArtifactUrl": url}


def test_the_most_specific_assigned_prefix_decides_whose_an_archive_is():
    """acme holds the whole bucket, beta a folder in it: beta's folder is beta's, not acme's."""
    serving = ServingReference(
        None,
        16,
        adapter_locations=("s3://shared-adapters/", "s3://shared-adapters/beta/"),
        tenant_locations=(("acme", "s3://shared-adapters/"), ("beta", "s3://shared-adapters/beta/")),
    )
    record = DiscoveryRecord("main-1a2b3c4d", "main-1a2b3c4d-base", "main-1a2b3c4d", serving=serving)
    imported = tenant_import(record.to_json())
    url = "s3://shared-adapters/beta/beta-v1/adapter.tar.gz"
    assert refused(imported, "acme-v1", url) == (
        Problem(
            f"adapter 'acme-v1' of {IMPORT}",
            "artifact.url",
            rule_message(
                url,
                "under s3://shared-adapters/beta/, the prefix the platform assigned to tenant 'beta'",
                allowed="s3://shared-adapters/",
            ),
        ),
    )
    imported.add_adapter("acme-v1", artifact=AdapterArtifact.from_s3_url("s3://shared-adapters/acme-v1/adapter.tar.gz"))
    assert list(imported.adapters) == ["acme-v1"]


@pytest.mark.parametrize(
    ("tenant", "options", "field", "message"),
    [
        (
            None,
            {},
            "tenant",
            "the platform's endpoint assigns adapter locations to tenants ('acme', 'globex'); import with tenant='<yours>' "
            "so this stack's adapters are held to its own prefix",
        ),
        (
            "initech",
            {},
            "tenant",
            "'initech' is not a tenant of the platform's endpoint (its tenants: 'acme', 'globex'); ask the platform to assign "
            "it a location: AdapterLocation.from_s3_url('s3://<bucket>/<prefix>/', tenant='initech')",
        ),
        (
            "acme",
            {"adapter_locations": [AdapterLocation.from_s3_url(GLOBEX)]},
            "adapter_locations",
            f"cannot widen tenant 'acme''s locations: the platform assigns them ({ACME}); leave adapter_locations out",
        ),
        ("ac_me", {}, "tenant", "tenant 'ac_me' must be 1 to 63 letters, digits and inner hyphens"),
    ],
    ids=["no-tenant", "unknown-tenant", "widening", "bad-name"],
)
def test_an_import_of_an_assigning_platform_names_one_of_its_tenants(assigning, tenant, options, field, message):
    _, text, _ = assigning
    with pytest.raises(ConfigurationError) as caught:
        tenant_import(text, tenant=tenant, **options)
    assert caught.value.problems == (Problem(IMPORT, field, message),)


def test_without_assignments_a_single_team_keeps_todays_rule_and_a_named_tenant_is_refused():
    serving = ServingReference(None, 16, adapter_locations=(ADAPTER_BUCKET_URL,))
    text = DiscoveryRecord("main-1a2b3c4d", "main-1a2b3c4d-base", "main-1a2b3c4d", serving=serving).to_json()
    single = tenant_import(text, tenant=None)
    single.add_adapter("team-v1", artifact=AdapterArtifact.from_s3_url(f"{ADAPTER_BUCKET_URL}anything/team-v1/adapter.tar.gz"))
    assert single.tenant is None and list(single.adapters) == ["team-v1"]
    with pytest.raises(ConfigurationError) as caught:
        tenant_import(text, tenant="acme")
    assert caught.value.problems == (
        Problem(
            IMPORT,
            "tenant",
            (
                "'acme' is named, but the platform's endpoint assigns no tenant an adapter location, so nothing could hold this "
                "stack to its own prefix; import without tenant=, or ask the platform to assign one: "
                "AdapterLocation.from_s3_url('s3://<bucket>/<prefix>/', tenant='acme')"
            ),
        ),
    )


def test_the_lookup_import_carries_its_tenant_and_the_first_pass_placeholder_is_not_refused(assigning, tmp_path):
    endpoint, text, _ = assigning
    key = lookup_key(tmp_path / "first-pass", endpoint.discovery_parameter_name)
    pending = MultiAdapterEndpoint.from_discovery_parameter(
        tenant_stack(cdk.App()), "Serving", parameter_name=endpoint.discovery_parameter_name, tenant="acme"
    )
    assert pending.lookup_pending and pending.tenant == "acme"
    imported = MultiAdapterEndpoint.from_discovery_parameter(
        tenant_stack(cdk.App(context={key: text})), "Serving", parameter_name=endpoint.discovery_parameter_name, tenant="acme"
    )
    assert imported.tenant == "acme" and [loc.describe() for loc in imported.adapter_locations] == [ACME]
    with pytest.raises(ConfigurationError) as caught:
        imported.add_adapter("acme-v1", artifact=AdapterArtifact.from_s3_url(f"{GLOBEX}acme-v1/adapter.tar.gz"))
    assert "breaks the tenant-location rule" in str(caught.value)
    with pytest.raises(ConfigurationError) as caught:
        MultiAdapterEndpoint.from_discovery_parameter(
            tenant_stack(cdk.App(context={key: text})), "Serving", parameter_name=endpoint.discovery_parameter_name
        )
    assert [p.field for p in caught.value.problems] == ["tenant"]


def test_one_location_is_assigned_to_one_tenant_at_the_platforms_synth():
    endpoint = build_endpoint(adapter_locations=[AdapterLocation.from_s3_url(ACME, tenant="acme")])
    with pytest.raises(ConfigurationError) as caught:
        endpoint.add_adapter_location(AdapterLocation.from_s3_url("s3://tenant-adapters/acme", tenant="globex"))
    assert caught.value.problems == (
        Problem(
            "MultiAdapterEndpoint 'Test-Stack/Serving'",
            "adapter_locations",
            "s3://tenant-adapters/acme is assigned to tenant 'acme' already; one location has one tenant "
            "(give 'globex' a prefix of its own)",
        ),
    )
    assert [loc.tenant for loc in endpoint.adapter_locations] == ["acme"]
    with pytest.raises(ConfigurationError) as caught:
        build_endpoint(adapter_locations=[AdapterLocation.from_s3_url(ACME, tenant="acme team")])
    assert [(p.field, p.message) for p in caught.value.problems] == [
        ("adapter_locations[0].tenant", "tenant 'acme team' must be 1 to 63 letters, digits and inner hyphens")
    ]


def test_a_platform_without_assignments_publishes_the_record_it_did_before(assigning, tmp_path):
    """No tenant: the serving reference stays version 1 with no ``tenants`` key (old readers, same text)."""
    app = cdk.App(outdir=str(tmp_path / "single"))
    endpoint = build_endpoint(cdk.Stack(app, "Platform", env=ENV))
    document = json.loads(published_record(synth_templates(app)["Platform"]))
    assert document["serving"]["version"] == 1 and "tenants" not in document["serving"]
    assert endpoint.discovery_record().serving.tenant_locations == ()
