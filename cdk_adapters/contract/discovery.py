"""The discovery record: how a client finds the endpoint and the component that serves an adapter.

`MultiAdapterEndpoint` publishes one record per endpoint (an SSM parameter, see
`cdk_adapters.discovery`); a runtime client reads it and never needs the construct. The record
holds the endpoint, the base component and the *rule* that maps an adapter name to its component
name, not a per-adapter listing, so its size does not depend on the adapter count: a fleet of a
thousand adapters has the same record as a fleet of one, and adding an adapter never changes it.

Versioning: ``version`` is the record's major version. A reader refuses a version it does not
know (it cannot interpret the rule), and ignores keys it does not know within its version, so
optional keys can be added without breaking older clients.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

RECORD_KIND = "cdk-adapters/discovery"
RECORD_VERSION = 1
"""The major version this module writes and reads."""


class DiscoveryRecordError(ValueError):
    """The text is not a discovery record this version of cdk-adapters can read."""


def adapter_component_name(prefix: str, adapter_name: str) -> str:
    """The one naming rule: ``<prefix>-<adapter, lower-cased>``.

    SageMaker compares inference component names case-insensitively and IAM ARNs carry them
    lower-cased, so the adapter part is lower-cased.
    """
    return f"{prefix}-{adapter_name.lower()}"


@dataclass(frozen=True)
class DiscoveryRecord:
    """Everything a client needs to call any adapter of one endpoint."""

    endpoint_name: str
    """``EndpointName`` for ``InvokeEndpoint``."""
    base_inference_component_name: str
    """The base model's component (``InferenceComponentName`` for base-model calls)."""
    component_prefix: str
    """Adapter components are named ``adapter_component_name(component_prefix, adapter)``."""
    allow_base_model: bool = False
    """Whether the container serves requests without an adapter (they get 400 otherwise)."""

    def component_name(self, adapter_name: str) -> str:
        """The inference component that serves `adapter_name`."""
        return adapter_component_name(self.component_prefix, adapter_name)

    def to_json(self) -> str:
        """Compact, key-sorted JSON: the same record always renders to the same text."""
        document: dict[str, Any] = {"kind": RECORD_KIND, "version": RECORD_VERSION, **asdict(self)}
        return json.dumps(document, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "DiscoveryRecord":
        """Parse a record, or raise `DiscoveryRecordError` saying what is wrong with it."""
        try:
            document = json.loads(text)
        except (TypeError, ValueError) as error:
            raise DiscoveryRecordError(f"not JSON: {error}") from None
        if not isinstance(document, dict) or document.get("kind") != RECORD_KIND:
            raise DiscoveryRecordError(f"not a {RECORD_KIND} record (its 'kind' is {_get(document, 'kind')!r})")
        version = document.get("version")
        if version != RECORD_VERSION:
            raise DiscoveryRecordError(
                f"record version {version!r} is not {RECORD_VERSION}, the version this cdk-adapters reads; "
                "use the cdk-adapters release that deployed the endpoint"
            )
        problems = [
            f"'{key}' must be a non-empty string"
            for key in ("endpoint_name", "base_inference_component_name", "component_prefix")
            if not isinstance(document.get(key), str) or not document[key]
        ]
        if not isinstance(document.get("allow_base_model", False), bool):
            problems.append("'allow_base_model' must be true or false")
        if problems:
            raise DiscoveryRecordError("; ".join(problems))
        return cls(
            endpoint_name=document["endpoint_name"],
            base_inference_component_name=document["base_inference_component_name"],
            component_prefix=document["component_prefix"],
            allow_base_model=document.get("allow_base_model", False),
        )


def _get(document: object, key: str) -> object:
    return document.get(key) if isinstance(document, dict) else None
