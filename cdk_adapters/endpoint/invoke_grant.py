"""`grant_invoke`'s statements: rendered at synth, so they follow the endpoint as it ends up.

A caller of an adapter may be sent to the main endpoint's component or, for the share the
discovery record gives the canary, to the canary endpoint's component of the same adapter; an
alias resolves to any of its targets. So a grant must name every ARN a client can call for the
names granted, and those depend on `add_adapter`, `add_alias` and `set_canary` calls that may
come after the grant (aws-cdk-lib's grants do not depend on call order either). Each grant's
resources are therefore a `Lazy` list computed when the template is rendered, and the names are
checked at synth (`validate`). Each statement carries its own ``Sid``: IAM's policy minimisation
would otherwise merge it with another statement, which a lazy list cannot be merged into.

A tenant's stack (`ImportedMultiAdapterEndpoint`, `TenantInvokeGrants`) shares the endpoint with
other tenants and the platform, so its default is narrower: its own adapters (those added
through that import), rendered at synth like the owned endpoint's; a name must be one of them or
an alias of the platform's record; ``<prefix>-*`` (every tenant's component and the base) only
with an explicit ``all_components=True``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import jsii
from aws_cdk import IListProducer, IResolveContext, Lazy, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct, IValidation

from cdk_adapters.contract.adapter_names import adapter_name_key
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.private.arns import endpoint_arn as endpoint_arn_of
from cdk_adapters.private.arns import inference_component_arn
from cdk_adapters.problems import Problem

INVOKE_ACTIONS = ("sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream")


class _Components(Protocol):
    def component(self, adapter_name: object) -> Any: ...


class GrantedEndpoint(IConstruct, Protocol):
    """What a grant reads of a `MultiAdapterEndpoint` (described here, so that this module, which the
    imported endpoint also uses, needs no import of endpoint.py). Read-only, as a grant only reads."""

    @property
    def endpoint_arn(self) -> str: ...
    @property
    def prefix(self) -> str: ...
    @property
    def fleet(self) -> _Components: ...
    @property
    def aliases(self) -> Mapping[str, Mapping[str, int]]: ...
    @property
    def canary_endpoint(self) -> GrantedEndpoint | None: ...


@dataclass(frozen=True)
class _Grant:
    names: tuple[str, ...] | None
    """Adapter or alias names granted; None: every component of the endpoint (and of its canary)."""
    grantee: str
    """The grantee, as messages name it."""


@jsii.implements(IValidation)
class InvokeGrants:
    """The `grant_invoke` calls of one endpoint; a validation of it (names are checked at synth)."""

    def __init__(self, endpoint: GrantedEndpoint) -> None:
        self._endpoint = endpoint
        self._grants: list[_Grant] = []
        self._sid_prefix = "InvokeAdapters" + hashlib.sha256(endpoint.node.path.encode()).hexdigest()[:8]

    def add(self, grantee: iam.IGrantable, names: Sequence[str] | None) -> iam.Grant:
        grant = _Grant(None if names is None else tuple(names), _describe(grantee))
        self._grants.append(grant)
        result = iam.Grant.add_to_principal(
            grantee=grantee, actions=list(INVOKE_ACTIONS), resource_arns=Lazy.uncached_list(_Resources(self, grant))
        )
        for statement in result.principal_statements:
            statement.sid = f"{self._sid_prefix}{len(self._grants)}"
        return result

    def validate(self) -> list[str]:
        """Granted names that are neither an adapter nor an alias of the endpoint, at synth."""
        endpoint = self._endpoint
        return [
            f"MultiAdapterEndpoint {endpoint.node.path!r}: grant_invoke.adapters: {name!r} (granted to "
            f"{grant.grantee}) is not an adapter or alias of this endpoint; add it, or remove it from the grant"
            for grant in self._grants
            for name in grant.names or ()
            if self._adapters_of(name) is None
        ]

    def _adapters_of(self, name: str) -> list[str] | None:
        """The adapters a call to `name` may reach: itself, or an alias's targets; None: unknown."""
        endpoint = self._endpoint
        if endpoint.fleet.component(name) is not None:
            return [name]
        targets = next((t for alias, t in endpoint.aliases.items() if adapter_name_key(alias) == adapter_name_key(name)), None)
        return None if targets is None else list(targets)

    def resources(self, grant: _Grant) -> list[str]:
        """Every ARN a client calling the granted names can reach, main endpoint and canary."""
        endpoint = self._endpoint
        canary = endpoint.canary_endpoint
        main_arns = [endpoint.endpoint_arn]
        canary_arns: list[str] = []
        if grant.names is None:
            main_arns.append(_component_arn(endpoint, f"{endpoint.prefix}-*"))
            if canary is not None:
                canary_arns = [canary.endpoint_arn, _component_arn(canary, f"{canary.prefix}-*")]
            return main_arns + canary_arns
        adapters = dict.fromkeys(a for name in grant.names for a in self._adapters_of(name) or ())
        for adapter in adapters:
            component = endpoint.fleet.component(adapter)
            if component is not None:
                main_arns.append(_component_arn(endpoint, component.inference_component_name))
            if canary is None:
                continue
            served = canary.fleet.component(adapter)
            if served is not None:
                canary_arns.append(_component_arn(canary, served.inference_component_name))
        if canary is not None and canary_arns:
            canary_arns.insert(0, canary.endpoint_arn)
        return list(dict.fromkeys(main_arns + canary_arns))


def _component_arn(endpoint: GrantedEndpoint, component_name: str) -> str:
    return inference_component_arn(endpoint, component_name)


def _describe(grantee: iam.IGrantable) -> str:
    return repr(grantee.node.path) if isinstance(grantee, Construct) else type(grantee).__name__


@jsii.implements(IListProducer)
class _Resources:
    def __init__(self, grants: InvokeGrants | TenantInvokeGrants, grant: Any) -> None:
        self._grants = grants
        self._grant = grant

    def produce(self, context: IResolveContext) -> list[str]:
        return self._grants.resources(self._grant)


class TenantGrantedEndpoint(IConstruct, Protocol):
    """What a tenant grant reads of an `ImportedMultiAdapterEndpoint`."""

    @property
    def endpoint_arn(self) -> str: ...
    @property
    def record(self) -> DiscoveryRecord: ...

    @property
    def adapters(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class _TenantGrant:
    names: tuple[str, ...] | None
    """Adapter or alias names granted; None: this stack's own adapters (or every component, with
    `all_components`)."""
    all_components: bool
    grantee: str


@jsii.implements(IValidation)
class TenantInvokeGrants:
    """The `grant_invoke` calls of one import in a tenant's stack; a validation of it."""

    def __init__(self, endpoint: TenantGrantedEndpoint) -> None:
        self._endpoint = endpoint
        self._grants: list[_TenantGrant] = []
        self._sid_prefix = "InvokeTenantAdapters" + hashlib.sha256(endpoint.node.path.encode()).hexdigest()[:8]

    def add(self, grantee: iam.IGrantable, names: Sequence[str] | None, all_components: bool) -> iam.Grant:
        grant = _TenantGrant(None if names is None else tuple(names), all_components, _describe(grantee))
        self._grants.append(grant)
        if all_components:  # known now, whatever is added later: a literal list, as before
            return iam.Grant.add_to_principal(grantee=grantee, actions=list(INVOKE_ACTIONS), resource_arns=self.resources(grant))
        result = iam.Grant.add_to_principal(
            grantee=grantee, actions=list(INVOKE_ACTIONS), resource_arns=Lazy.uncached_list(_Resources(self, grant))
        )
        for statement in result.principal_statements:
            statement.sid = f"{self._sid_prefix}{len(self._grants)}"
        return result

    def validate(self) -> list[str]:
        """At synth: a default grant has adapters to grant; each named grant names this stack's
        adapter or a platform alias."""
        subject = f"imported MultiAdapterEndpoint {self._endpoint.node.path!r}"
        found = []
        for grant in self._grants:
            if grant.all_components:
                continue
            if grant.names is None and not self._endpoint.adapters:
                found.append(
                    f"{subject}: grant_invoke (granted to {grant.grantee}) grants this stack's own adapters by default, "
                    "and none is added; add one with add_adapter, name a platform alias in adapters=, or pass "
                    "all_components=True to grant every component of the endpoint (every tenant's and the base)"
                )
            found += [
                f"{subject}: grant_invoke.adapters: {name!r} (granted to {grant.grantee}) is neither an adapter of this "
                "stack nor an alias of the platform's endpoint; a tenant stack grants its own adapters (add_adapter) or "
                "the platform's aliases (all_components=True grants every component of the endpoint)"
                for name in grant.names or ()
                if self._targets(name) is None
            ]
        return found

    def _own(self) -> list[str]:
        return list(self._endpoint.adapters)

    def _targets(self, name: str) -> list[str] | None:
        """The adapters a call to `name` may reach: this stack's adapter itself, or a platform
        alias's targets; None: neither."""
        key = adapter_name_key(name)
        own = next((adapter for adapter in self._own() if adapter_name_key(adapter) == key), None)
        if own is not None:
            return [own]
        aliases = self._endpoint.record.aliases
        targets = next((t for alias, t in aliases.items() if adapter_name_key(alias) == key), None)
        return None if targets is None else list(targets)

    def resources(self, grant: _TenantGrant) -> list[str]:
        """Every ARN a client calling the granted names can reach, main endpoint and canary."""
        endpoint = self._endpoint
        record = endpoint.record
        canary = record.canary
        stack = Stack.of(endpoint)

        def component(name: str) -> str:
            return inference_component_arn(stack, name)

        def endpoint_arn(name: str) -> str:
            return endpoint_arn_of(stack, name)

        if grant.all_components:
            arns = [endpoint.endpoint_arn, component(f"{record.component_prefix}-*")]
            if canary is not None:
                arns += [endpoint_arn(canary.endpoint_name), component(f"{canary.component_prefix}-*")]
            return arns
        granted = self._own() if grant.names is None else [t for name in grant.names for t in self._targets(name) or ()]
        targets = list(dict.fromkeys(adapter_name_key(target) for target in granted))
        main = [endpoint.endpoint_arn] + [component(record.component_name(target)) for target in targets]
        served = [target for target in targets if canary is not None and canary.serves(target)]
        if canary is None or not served:
            return main
        return main + [endpoint_arn(canary.endpoint_name)] + [component(canary.component_name(target)) for target in served]


def granted_list_problems(adapters: object, subject: str, *, leave_out: str) -> list[Problem]:
    """`grant_invoke(adapters=...)` is None or a non-empty list of names (a bare string is refused:
    it would be read letter by letter). `leave_out` says what leaving it out grants."""
    if adapters is not None and (isinstance(adapters, str) or not list(adapters)):  # type: ignore[call-overload]  # user input: an iterable or not
        return [
            Problem(
                subject,
                "grant_invoke.adapters",
                f"got {adapters!r}; name at least one adapter in a list, or leave it out to grant {leave_out}",
            )
        ]
    return []
