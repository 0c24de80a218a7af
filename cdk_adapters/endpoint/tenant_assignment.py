"""How a tenant's stack is held to what the platform assigned it: which tenant it is, the
tenant-location rule for its published adapters, and its own stack's resource budget."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import jsii
from aws_cdk import Stack
from constructs import IConstruct, IValidation

from cdk_adapters.artifacts.artifact import S3Object
from cdk_adapters.contract.discovery import TENANT_LOCATION_RULE, ServingReference, tenant_name_problems
from cdk_adapters.endpoint.fleet import CLOUDFORMATION_RESOURCE_LIMIT, IN_STACK_BUDGET, own_resource_count
from cdk_adapters.problems import Problem


class _HoldsAdapters(IConstruct, Protocol):
    @property
    def adapters(self) -> Mapping[str, Any]: ...


def tenant_location_problems(
    serving: ServingReference | None, tenant: str | None, published: S3Object, subject: str
) -> list[Problem]:
    """The tenant-location rule: the most specific assigned location holding the object is this tenant's."""
    assert serving is not None and tenant is not None, "only an import assigned a tenant checks this rule"
    allowed = ", ".join(serving.locations_of(tenant))
    owner = serving.owner_of(published.bucket_name, published.key)
    if owner is not None and owner[0].lower() == tenant.lower():
        return []
    where = (
        "under none of them" if owner is None else f"under {owner[1]}, the prefix the platform assigned to tenant {owner[0]!r}"
    )
    return [
        Problem(
            subject,
            published.field,
            f"{published.url} breaks the {TENANT_LOCATION_RULE} rule: tenant {tenant!r} may serve adapters only from "
            f"its own prefix ({allowed}), and this archive lies {where}; publish it under {allowed.split(', ')[0]}",
        )
    ]


def assigned_tenant(
    serving: ServingReference | None, tenant: str | None, extra_locations: bool, subject: str
) -> tuple[str | None, list[Problem]]:
    """The tenant as the platform assigned it (None when the record assigns no tenant), and what
    is wrong with the import's `tenant` against the record's assignments."""
    if tenant is not None and tenant_name_problems(tenant):
        return None, [Problem(subject, "tenant", message) for message in tenant_name_problems(tenant)]
    tenants = serving.tenants if serving is not None else ()
    listed = ", ".join(map(repr, tenants))
    if not tenants:
        if tenant is not None and serving is not None:
            return None, [
                Problem(
                    subject,
                    "tenant",
                    (
                        f"{tenant!r} is named, but the platform's endpoint assigns no tenant an adapter location, so nothing "
                        "could hold this stack to its own prefix; import without tenant=, or ask the platform to assign "
                        f"one: AdapterLocation.from_s3_url('s3://<bucket>/<prefix>/', tenant={tenant!r})"
                    ),
                )
            ]
        return None, []
    if tenant is None:
        return None, [
            Problem(
                subject,
                "tenant",
                (
                    f"the platform's endpoint assigns adapter locations to tenants ({listed}); import with tenant='<yours>' "
                    "so this stack's adapters are held to its own prefix"
                ),
            )
        ]
    assert serving is not None, "tenants are assigned only in a serving reference"
    assigned = serving.tenant_of(tenant)
    if assigned is None:
        return None, [
            Problem(
                subject,
                "tenant",
                (
                    f"{tenant!r} is not a tenant of the platform's endpoint (its tenants: {listed}); ask the platform to assign "
                    f"it a location: AdapterLocation.from_s3_url('s3://<bucket>/<prefix>/', tenant={tenant!r})"
                ),
            )
        ]
    if extra_locations:
        return None, [
            Problem(
                subject,
                "adapter_locations",
                (
                    f"cannot widen tenant {assigned!r}'s locations: the platform assigns them "
                    f"({', '.join(serving.locations_of(assigned))}); leave adapter_locations out"
                ),
            )
        ]
    return assigned, []


@jsii.implements(IValidation)
class TenantStackBudget:
    """At synth: the tenant's stack, which holds its components directly, keeps within budget."""

    def __init__(self, endpoint: _HoldsAdapters) -> None:
        self._endpoint = endpoint

    def validate(self) -> list[str]:
        stack = Stack.of(self._endpoint)
        held = own_resource_count(stack)
        if held <= IN_STACK_BUDGET:
            return []
        return [
            f"{stack.node.path}: holds {held} resources with {len(self._endpoint.adapters)} adapter components; "
            f"CloudFormation allows {CLOUDFORMATION_RESOURCE_LIMIT} and this library stops at {IN_STACK_BUDGET}. "
            "Add further adapters from another tenant stack"
        ]
