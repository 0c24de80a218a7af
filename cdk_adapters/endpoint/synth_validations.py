"""What the endpoint checks at synth, once every adapter, alias and canary is known: alias
targets, adapters named by the alarm settings, and the adapters a canary serves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import jsii
from constructs import IConstruct, IValidation

from cdk_adapters.contract.adapter_names import SAGEMAKER_NAME_PATTERN, adapter_name_key
from cdk_adapters.contract.discovery import alias_problems


class _OptedIn(Protocol):
    def opted_in_names(self) -> Sequence[str]: ...


class ValidatedEndpoint(IConstruct, Protocol):
    """What these validations read of a `MultiAdapterEndpoint`."""

    @property
    def adapters(self) -> Mapping[str, Any]: ...
    @property
    def aliases(self) -> Mapping[str, Mapping[str, int]]: ...
    @property
    def monitoring(self) -> _OptedIn: ...
    @property
    def canary_endpoint(self) -> ValidatedEndpoint | None: ...


def alias_name_problems(alias: object) -> list[str]:
    """An alias is named like an inference component (it is looked up where component names are)."""
    if not isinstance(alias, str) or not SAGEMAKER_NAME_PATTERN.match(alias):
        return ["must match ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$ (letters, digits and inner hyphens)"]
    return []


@jsii.implements(IValidation)
class AdapterNamesValidation:
    """At synth: every adapter named in ``alarms.adapter_names`` is an adapter of this endpoint,
    and a canary serves only adapters this endpoint serves."""

    def __init__(self, endpoint: ValidatedEndpoint) -> None:
        self._endpoint = endpoint

    def validate(self) -> list[str]:
        endpoint = self._endpoint
        known = {adapter_name_key(name) for name in endpoint.adapters}
        found = [
            f"MultiAdapterEndpoint {endpoint.node.path!r}: alarms.adapter_names: {name!r} is not an adapter of this "
            "endpoint (alarms on an adapter that does not exist would never see a request)"
            for name in endpoint.monitoring.opted_in_names()
            if adapter_name_key(name) not in known
        ]
        canary = endpoint.canary_endpoint
        if canary is not None:
            served = list(canary.adapters)
            if not served:
                found.append(f"MultiAdapterEndpoint {endpoint.node.path!r}: canary {canary.node.path!r} serves no adapter")
            found += [
                f"MultiAdapterEndpoint {endpoint.node.path!r}: canary: {name!r} is served by the canary but not by this endpoint"
                for name in served
                if adapter_name_key(name) not in known
            ]
        return found


@jsii.implements(IValidation)
class AliasValidation:
    """At synth: every alias targets adapters of this endpoint and shadows none of them."""

    def __init__(self, endpoint: ValidatedEndpoint) -> None:
        self._endpoint = endpoint

    def validate(self) -> list[str]:
        endpoint = self._endpoint
        adapters = endpoint.adapters.keys()
        return [
            f"alias {alias!r} of MultiAdapterEndpoint {endpoint.node.path!r}: targets: {message}"
            for alias, message in alias_problems(endpoint.aliases, adapters)
        ]
