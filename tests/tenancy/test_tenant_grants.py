"""A tenant stack's `grant_invoke` grants its own adapters unless told otherwise (issue 27, point 6).

Before, an import's `grant_invoke(caller)` granted ``<prefix>-*`` (every tenant's component and
the base) and accepted any adapter name, another tenant's included. Now the default is the
adapters added through that import, a name must be one of them or an alias of the platform's
record, and ``<prefix>-*`` needs ``all_components=True``. Statements are compared whole.
"""

from __future__ import annotations

import hashlib
import re

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.contract.discovery import CanaryRecord, DiscoveryRecord
from cdk_adapters.endpoint.imported import ImportedMultiAdapterEndpoint
from cdk_adapters.private.nag_acknowledgments import flatten_reference
from cdk_adapters.problems import ConfigurationError, Problem
from tests.constructs.conftest import ADAPTER_BUCKET_URL
from tests.support.synth_refusal import refused_at_synth

PREFIX = "main-1a2b3c4d"
ARN = "arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:"
ACTIONS = ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"]
CANARY = CanaryRecord("canary-1a2b3c4d", "canary-1a2b3c4d-base", "canary-1a2b3c4d", ("platform-v1", "acme-chat-v1"), 10)
RECORD = DiscoveryRecord(PREFIX, f"{PREFIX}-base", PREFIX, aliases={"platform": {"platform-v1": 100}})
IMPORT = "imported MultiAdapterEndpoint 'Tenant/Serving'"


def tenant(record: DiscoveryRecord = RECORD) -> tuple[cdk.Stack, ImportedMultiAdapterEndpoint, iam.Role]:
    stack = cdk.Stack(cdk.App(), "Tenant")
    imported = ImportedMultiAdapterEndpoint(
        stack, "Serving", record=record, adapter_locations=[AdapterLocation.from_s3_url(ADAPTER_BUCKET_URL)]
    )
    return stack, imported, iam.Role(stack, "Caller", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))


def add(imported: ImportedMultiAdapterEndpoint, *names: str) -> None:
    for name in names:
        imported.add_adapter(name, artifact=AdapterArtifact.from_s3_url(f"{ADAPTER_BUCKET_URL}{name}/adapter.tar.gz"))


def invoke_statements(stack: cdk.Stack) -> list[dict]:
    """The caller's invoke statements, ARNs flattened to ``arn:<AWS::Partition>:...``."""
    [policy] = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    found = []
    for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        found.append({**statement, "Resource": [flatten_reference(r).replace("<Ref:", "<") for r in resources]})
    return found


def statement(sid: str | None, *resources: str) -> dict:
    rendered = {"Action": ACTIONS, "Effect": "Allow", "Resource": list(resources)}
    return rendered if sid is None else {**rendered, "Sid": sid}


def sid(stack: cdk.Stack, index: int) -> str:
    """The n-th grant's own Sid: a hash of the import's path, so IAM minimisation keeps it apart."""
    return f"InvokeTenantAdapters{hashlib.sha256(b'Tenant/Serving').hexdigest()[:8]}{index}"


def test_the_default_grants_this_stacks_own_adapters_only_whenever_they_are_added():
    stack, imported, role = tenant()
    add(imported, "acme-chat-v1")
    imported.grant_invoke(role)
    add(imported, "acme-search-v1")  # after the grant: rendered at synth, so it is granted too
    assert invoke_statements(stack) == [
        statement(
            sid(stack, 1),
            f"{ARN}endpoint/{PREFIX}",
            f"{ARN}inference-component/{PREFIX}-acme-chat-v1",
            f"{ARN}inference-component/{PREFIX}-acme-search-v1",
        ),
    ]


def test_a_named_grant_takes_this_stacks_adapters_and_the_platforms_aliases():
    stack, imported, role = tenant()
    add(imported, "acme-chat-v1", "acme-search-v1")
    imported.grant_invoke(role, adapters=["ACME-chat-v1", "Platform"])  # names compare ignoring case
    assert invoke_statements(stack) == [
        statement(
            sid(stack, 1),
            f"{ARN}endpoint/{PREFIX}",
            f"{ARN}inference-component/{PREFIX}-acme-chat-v1",
            f"{ARN}inference-component/{PREFIX}-platform-v1",
        ),
    ]


def test_a_grant_of_own_adapters_includes_the_canarys_component_of_those_it_serves():
    stack, imported, role = tenant(DiscoveryRecord(**{**RECORD.__dict__, "canary": CANARY}))
    add(imported, "acme-chat-v1", "acme-search-v1")
    imported.grant_invoke(role)
    assert invoke_statements(stack) == [
        statement(
            sid(stack, 1),
            f"{ARN}endpoint/{PREFIX}",
            f"{ARN}inference-component/{PREFIX}-acme-chat-v1",
            f"{ARN}inference-component/{PREFIX}-acme-search-v1",
            f"{ARN}endpoint/canary-1a2b3c4d",
            f"{ARN}inference-component/canary-1a2b3c4d-acme-chat-v1",
        ),
    ]


def test_every_component_needs_all_components_true():
    stack, imported, role = tenant(DiscoveryRecord(**{**RECORD.__dict__, "canary": CANARY}))
    imported.grant_invoke(role, all_components=True)
    assert invoke_statements(stack) == [
        statement(
            None,
            f"{ARN}endpoint/{PREFIX}",
            f"{ARN}inference-component/{PREFIX}-*",
            f"{ARN}endpoint/canary-1a2b3c4d",
            f"{ARN}inference-component/canary-1a2b3c4d-*",
        ),
    ]


def test_another_tenants_adapter_is_refused_at_synth():
    stack, imported, role = tenant()
    add(imported, "acme-chat-v1")
    imported.grant_invoke(role, adapters=["acme-chat-v1", "globex-chat-v1", "platform-v1"])
    with refused_at_synth(
        f"{IMPORT}: grant_invoke.adapters: 'globex-chat-v1' (granted to 'Tenant/Caller') is neither an adapter of this "
        "stack nor an alias of the platform's endpoint; a tenant stack grants its own adapters (add_adapter) or the "
        "platform's aliases (all_components=True grants every component of the endpoint)",
        f"{IMPORT}: grant_invoke.adapters: 'platform-v1' (granted to 'Tenant/Caller') is neither an adapter of this stack",
        construct="Tenant/Serving",
    ) as caught:
        Template.from_stack(stack)
    assert "'acme-chat-v1' (granted" not in str(caught.value)


def test_a_default_grant_with_no_adapter_of_its_own_is_refused_at_synth():
    stack, imported, role = tenant()
    imported.grant_invoke(role)
    with refused_at_synth(
        f"{IMPORT}: grant_invoke (granted to 'Tenant/Caller') grants this stack's own adapters by default, and none is "
        "added; add one with add_adapter, name a platform alias in adapters=, or pass all_components=True to grant "
        "every component of the endpoint (every tenant's and the base)",
        construct="Tenant/Serving",
    ):
        Template.from_stack(stack)


@pytest.mark.parametrize(
    ("options", "field", "message"),
    [
        (
            {"adapters": ["acme-chat-v1"], "all_components": True},
            "grant_invoke.all_components",
            "is given with adapters=; grant named adapters, or every component, not both",
        ),
        ({"all_components": "yes"}, "grant_invoke.all_components", "must be True or False, got 'yes'"),
        (
            {"adapters": []},
            "grant_invoke.adapters",
            "got []; name at least one adapter in a list, or leave it out to grant this stack's adapters",
        ),
    ],
    ids=["both", "not-a-bool", "empty"],
)
def test_what_grant_invoke_refuses_at_once(options, field, message):
    stack, imported, role = tenant()
    with pytest.raises(ConfigurationError) as caught:
        imported.grant_invoke(role, **options)
    assert caught.value.problems == (Problem(IMPORT, field, message),)
    assert Template.from_stack(stack).find_resources("AWS::IAM::Policy") == {}


def test_a_tenant_may_read_its_own_adapters_capture_stream_and_no_other_tenants():
    stack, imported, role = tenant()
    add(imported, "acme-chat-v1")
    imported.grant_read_capture(role, ["ACME-chat-v1"])
    [policy] = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    [read] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert read["Action"] == "logs:GetLogEvents"
    assert flatten_reference(read["Resource"]) == (
        f"arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/cdk-adapters/capture/{PREFIX}:log-stream:acme-chat-v1"
    )
    for foreign in (["platform-v1"], ["other-tenant-v1"], []):
        with pytest.raises(ConfigurationError, match=re.escape("grant_read_capture.adapters")):
            imported.grant_read_capture(role, foreign)
