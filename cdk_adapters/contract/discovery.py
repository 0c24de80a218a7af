"""The discovery record: how a client finds the endpoint and the component that serves an adapter.

`MultiAdapterEndpoint` publishes one record per endpoint (an SSM parameter, see
`cdk_adapters.endpoint.discovery_parameter`); a runtime client reads it and never needs the construct. The record
holds the endpoint, the base component and the *rule* that maps an adapter name to its component
name, not a per-adapter listing, so its size does not depend on the adapter count: a fleet of a
thousand adapters has the same record as a fleet of one, and adding an adapter never changes it.

Versioning: ``version`` is the record's major version. A reader refuses a version it does not
know (it cannot interpret the rule), and ignores keys it does not know within its version, so
optional keys can be added without breaking older clients.

The optional ``serving`` key (`ServingReference`, versioned on its own) carries what another team
needs to check an adapter offline before adding it to this endpoint: the base model's facts, the
served ``--max-lora-rank``, the vision flag and the adapter locations. Clients ignore it; an
imported endpoint (`MultiAdapterEndpoint.from_discovery_parameter`) runs the compatibility gate
against it. A reader that does not know its version reads the record without it.

Tenant assignments (``serving.tenants``: tenant -> the adapter-location URLs that tenant's
adapters must come from) are written only when the platform assigns a location to a tenant, and
then with serving version 2 (`SERVING_TENANTS_VERSION`): a reader from before assignments existed
does not know version 2, so it reads the record *without* the serving reference (no locations, no
assignments) and refuses every published tenant adapter as outside every location, instead of
silently ignoring the assignment. A record without assignments is written as version 1, byte for
byte as before. The size grows with the tenants and their prefixes, never with the adapters.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cdk_adapters.contract.adapter_names import (
    SAGEMAKER_NAME_MAX_LENGTH,
    SAGEMAKER_NAME_PATTERN,
    adapter_component_name,
    adapter_name_key,
)
from cdk_adapters.contract.canary_record import CanaryRecord as CanaryRecord  # re-exported: importers name it from here
from cdk_adapters.contract.s3_url import S3UrlError, as_prefix, parse_s3_url

RECORD_KIND = "cdk-adapters/discovery"
RECORD_VERSION = 1
"""The major version this module writes and reads."""
SERVING_VERSION = 1
"""The version of the optional ``serving`` key written when no tenant is assigned a location."""
SERVING_TENANTS_VERSION = 2
"""The version of the ``serving`` key written when tenants are assigned locations (``tenants``)."""
SERVING_VERSIONS_READ = (SERVING_VERSION, SERVING_TENANTS_VERSION)
"""Versions of the ``serving`` key this module reads."""
TENANT_LOCATION_RULE = "tenant-location"
"""The rule: a tenant's published adapter lies under an adapter location the platform assigned to
that tenant, and under no more specific location assigned to another tenant."""


class DiscoveryRecordError(ValueError):
    """The text is not a discovery record this version of cdk-adapters can read."""


_OPTIONAL_BASE_TEXT = ("architecture", "vision_tower_type", "vision_feature_select_strategy")


@dataclass(frozen=True)
class ServedBaseModel:
    """The base model's facts, as the compatibility gate compares adapters with them."""

    model_id: str | None
    revision: str | None
    hidden_size: int
    module_names: tuple[str, ...]
    """Leaf modules owning a 2-D weight, sorted."""
    vision_language: bool = False
    module_shapes: tuple[tuple[str, int, int], ...] | None = None
    """``(leaf, out, in)`` of every 2-D weight, sorted; None: not known (only `hidden_size` is)."""
    architecture: str | None = None
    vision_tower_type: str | None = None
    vision_feature_select_strategy: str | None = None
    """The vision-language facts the gate's engine-trap rules read; each written only when known."""

    def to_document(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "id": self.model_id,
            "revision": self.revision,
            "hidden_size": self.hidden_size,
            "module_names": list(self.module_names),
            "vision_language": self.vision_language,
        }
        if self.module_shapes is not None:
            shapes: dict[str, list[list[int]]] = {}
            for leaf, out, in_ in self.module_shapes:
                shapes.setdefault(leaf, []).append([out, in_])
            document["module_shapes"] = shapes
        for key in _OPTIONAL_BASE_TEXT:
            if getattr(self, key) is not None:
                document[key] = getattr(self, key)
        return document

    @classmethod
    def from_document(cls, document: object) -> tuple[ServedBaseModel | None, list[str]]:
        if not isinstance(document, dict):
            return None, ["serving.base_model must be an object"]
        problems = [
            f"serving.base_model.{key} must be a non-empty string or null"
            for key in ("id", "revision")
            if document.get(key) is not None and (not isinstance(document[key], str) or not document[key])
        ]
        hidden = document.get("hidden_size")
        if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 1:
            problems.append(f"serving.base_model.hidden_size must be a positive integer, got {hidden!r}")
        modules = document.get("module_names")
        if not isinstance(modules, list) or not modules or not all(isinstance(m, str) and m for m in modules):
            problems.append("serving.base_model.module_names must be a non-empty list of module names")
        if not isinstance(document.get("vision_language", False), bool):
            problems.append("serving.base_model.vision_language must be true or false")
        problems += [
            f"serving.base_model.{key} must be a non-empty string"
            for key in _OPTIONAL_BASE_TEXT
            if key in document and (not isinstance(document[key], str) or not document[key])
        ]
        shapes: tuple[tuple[str, int, int], ...] | None = None
        if document.get("module_shapes") is not None:
            raw = document["module_shapes"]
            pairs = raw.items() if isinstance(raw, dict) else ()
            flat = [
                (leaf, shape[0], shape[1])
                for leaf, listed in pairs
                if isinstance(listed, list)
                for shape in listed
                if isinstance(shape, list) and len(shape) == 2 and all(_positive(n) for n in shape)
            ]
            expected = sum(len(listed) if isinstance(listed, list) else 1 for _, listed in pairs)
            if not isinstance(raw, dict) or len(flat) != expected:
                problems.append("serving.base_model.module_shapes must map each module to a list of [out, in] positive integers")
            shapes = tuple(sorted(flat))
        if problems:
            return None, problems
        assert isinstance(hidden, int) and isinstance(modules, list)  # otherwise a problem was found above
        return (
            cls(
                model_id=document.get("id"),
                revision=document.get("revision"),
                hidden_size=hidden,
                module_names=tuple(sorted(modules)),
                vision_language=document.get("vision_language", False),
                module_shapes=shapes,
                **{key: document.get(key) for key in _OPTIONAL_BASE_TEXT},
            ),
            [],
        )


@dataclass(frozen=True)
class ServingReference:
    """What an adapter must fit to be served by this endpoint, published for other teams' synth.

    The same facts the endpoint's own `add_adapter` checks local archives against, plus where
    the endpoint's role reads published adapters from.
    """

    base_model: ServedBaseModel | None
    """None: the platform stated no base facts; the rules comparing with the base then run only
    in the container."""
    max_lora_rank: int
    """The served ``--max-lora-rank``."""
    allow_vision_modules: bool = False
    adapter_locations: tuple[str, ...] = ()
    """``s3://bucket/prefix/`` the endpoint's role reads adapters from."""
    tenant_locations: tuple[tuple[str, str], ...] = ()
    """``(tenant, s3://bucket/prefix/)`` pairs, sorted: the locations assigned to each tenant
    (each one of `adapter_locations`). Empty: no tenant is assigned one."""
    tiers: tuple[tuple[int, str], ...] = ()
    """Rank tiers, ``(max_lora_rank, base inference component name)`` by rank, the first being
    `max_lora_rank`'s; an adapter attaches to the smallest that holds its rank. Empty: one tier.
    A reader that knows no tiers checks adapters against `max_lora_rank`, the first tier's, and
    so refuses any it would attach to the wrong base."""

    @property
    def largest_rank(self) -> int:
        """The highest rank any tier serves."""
        return max((rank for rank, _ in self.tiers), default=self.max_lora_rank)

    @property
    def tenants(self) -> tuple[str, ...]:
        """The tenants assigned a location, sorted, each once."""
        return tuple(dict.fromkeys(tenant for tenant, _ in self.tenant_locations))

    def tenant_of(self, name: str) -> str | None:
        """The assigned tenant called `name` (tenant names compare ignoring case), or None."""
        return next((tenant for tenant in self.tenants if tenant.lower() == name.lower()), None)

    def locations_of(self, tenant: str) -> tuple[str, ...]:
        """The location URLs assigned to `tenant` (ignoring case)."""
        return tuple(url for owner, url in self.tenant_locations if owner.lower() == tenant.lower())

    def owner_of(self, bucket: str, key: str) -> tuple[str, str] | None:
        """``(tenant, location URL)`` of the most specific assigned location holding the object
        ``bucket/key``; None when no assigned location holds it."""
        holding = [
            (len(as_prefix(parsed.key)), tenant, url)
            for tenant, url in self.tenant_locations
            for parsed in [parse_s3_url(url, key_required=False)]
            if parsed.holds(bucket, key)
        ]
        if not holding:
            return None
        _, tenant, url = max(holding)
        return tenant, url

    def to_document(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "version": SERVING_TENANTS_VERSION if self.tenant_locations else SERVING_VERSION,
            "max_lora_rank": self.max_lora_rank,
            "allow_vision_modules": self.allow_vision_modules,
            "adapter_locations": list(self.adapter_locations),
        }
        if self.base_model is not None:
            document["base_model"] = self.base_model.to_document()
        if self.tiers:
            document["tiers"] = [{"max_lora_rank": rank, "base_inference_component_name": name} for rank, name in self.tiers]
        if self.tenant_locations:
            tenants: dict[str, list[str]] = {}
            for tenant, url in self.tenant_locations:
                tenants.setdefault(tenant, []).append(url)
            document["tenants"] = tenants
        return document

    @classmethod
    def from_document(cls, document: object) -> tuple[ServingReference | None, list[str]]:
        """The reference and every problem with it; (None, []) for a version this module does not
        read (a client needs none of it)."""
        if not isinstance(document, dict):
            return None, ["'serving' must be an object"]
        version = document.get("version")
        if isinstance(version, bool) or version not in SERVING_VERSIONS_READ:
            return None, []
        problems: list[str] = []
        rank = document.get("max_lora_rank")
        if not _positive(rank):
            problems.append(f"serving.max_lora_rank must be a positive integer, got {rank!r}")
        if not isinstance(document.get("allow_vision_modules", False), bool):
            problems.append("serving.allow_vision_modules must be true or false")
        locations = document.get("adapter_locations", [])
        if not isinstance(locations, list):
            problems.append("serving.adapter_locations must be a list of s3:// URLs")
        else:
            for url in locations:
                try:
                    parse_s3_url(url, key_required=False)
                except S3UrlError as error:
                    problems.append(f"serving.adapter_locations: {error}")
        base = None
        if document.get("base_model") is not None:
            base, base_problems = ServedBaseModel.from_document(document["base_model"])
            problems += base_problems
        assigned: tuple[tuple[str, str], ...] = ()
        if version == SERVING_TENANTS_VERSION:  # version 1 knows no tenants: a key there is ignored
            assigned, tenant_problems = _tenants_from_document(
                document.get("tenants"), locations if isinstance(locations, list) else []
            )
            problems += tenant_problems
        tiers, tier_problems = _tiers_from_document(document.get("tiers"), rank)
        problems += tier_problems
        if problems:
            return None, problems
        assert isinstance(rank, int)  # otherwise a problem was found above
        return cls(base, rank, document.get("allow_vision_modules", False), tuple(locations), assigned, tiers), []


def _tiers_from_document(document: object, first_rank: object) -> tuple[tuple[tuple[int, str], ...], list[str]]:
    """``serving.tiers``: a list of ``{max_lora_rank, base_inference_component_name}``, by rising
    rank, the first at ``serving.max_lora_rank``; absent: one tier."""
    if document is None:
        return (), []
    shape = "serving.tiers must be a list of {max_lora_rank, base_inference_component_name}, by rising rank"
    if not isinstance(document, list) or len(document) < 2:
        return (), [f"{shape}, at least two"]
    tiers: list[tuple[int, str]] = []
    for entry in document:
        rank = entry.get("max_lora_rank") if isinstance(entry, dict) else None
        name = entry.get("base_inference_component_name") if isinstance(entry, dict) else None
        if not isinstance(rank, int) or not _positive(rank) or not isinstance(name, str) or not name:
            return (), [f"{shape}; got {entry!r}"]
        tiers.append((rank, name))
    ranks = [rank for rank, _ in tiers]
    if ranks != sorted(set(ranks)) or ranks[0] != first_rank:
        return (), [f"{shape}, the first at serving.max_lora_rank ({first_rank!r}); got ranks {ranks}"]
    return tuple(tiers), []


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
    aliases: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Stable name -> {versioned adapter: weight in percent}; weights sum to 100. Its size grows
    with the aliases a team keeps, never with the adapter count."""
    canary: CanaryRecord | None = None
    """The canary endpoint for a few of these adapters, if one is deployed (optional key
    ``canary``; readers that do not know it ignore it and call the main endpoint only)."""
    serving: ServingReference | None = None
    """What adapters must fit (optional key ``serving``; clients ignore it, imported endpoints
    gate adapters with it). None in records written before it existed."""

    def component_name(self, adapter_name: str) -> str:
        """The inference component that serves `adapter_name`."""
        return adapter_component_name(self.component_prefix, adapter_name)

    def resolve(self, name: str, rng: random.Random | None = None) -> str:
        """The adapter a call to `name` goes to: an alias picks one of its targets by weight;
        any other name is an adapter name already."""
        targets = _lookup(self.aliases, name)
        if targets is None:
            return name
        chooser = rng or random
        return chooser.choices(list(targets), weights=list(targets.values()))[0]

    def to_json(self) -> str:
        """Compact, key-sorted JSON: the same record always renders to the same text."""
        document: dict[str, Any] = {
            "kind": RECORD_KIND,
            "version": RECORD_VERSION,
            "endpoint_name": self.endpoint_name,
            "base_inference_component_name": self.base_inference_component_name,
            "component_prefix": self.component_prefix,
            "allow_base_model": self.allow_base_model,
        }
        if self.aliases:
            document["aliases"] = {alias: dict(targets) for alias, targets in self.aliases.items()}
        if self.canary is not None:
            document["canary"] = self.canary.to_document()
        if self.serving is not None:
            document["serving"] = self.serving.to_document()
        return json.dumps(document, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> DiscoveryRecord:
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
        aliases = document.get("aliases", {})
        if not isinstance(aliases, dict):
            problems.append("'aliases' must be an object")
            aliases = {}
        problems += [f"aliases.{alias}: {message}" for alias, message in alias_problems(aliases)]
        canary = None
        if "canary" in document:
            canary, canary_problems = CanaryRecord.from_document(document["canary"])
            problems += canary_problems
        serving = None
        if "serving" in document:
            serving, serving_problems = ServingReference.from_document(document["serving"])
            problems += serving_problems
        if problems:
            raise DiscoveryRecordError("; ".join(problems))
        return cls(
            endpoint_name=document["endpoint_name"],
            base_inference_component_name=document["base_inference_component_name"],
            component_prefix=document["component_prefix"],
            allow_base_model=document.get("allow_base_model", False),
            aliases=aliases,
            canary=canary,
            serving=serving,
        )


def alias_problems(aliases: Mapping[str, Mapping[str, int]], adapters: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """``(alias, message)`` for every problem with `aliases`; empty when they are fine.

    Each alias maps to at least one target with integer weights from 1 to 100 that sum to 100.
    With `adapters` (the endpoint's adapter names), every target must be one of them and no alias
    may shadow one: names compare case-insensitively, as SageMaker's do.
    """
    known = None if adapters is None else {adapter_name_key(name) for name in adapters}
    found: list[tuple[str, str]] = []
    for alias, targets in aliases.items():
        if not isinstance(targets, Mapping) or not targets:
            found.append((alias, "must map to at least one adapter with a weight, e.g. {support-en-v4: 100}"))
            continue
        weights = list(targets.values())
        if any(isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= 100 for w in weights):
            found.append((alias, f"weights must be integers from 1 to 100, got {dict(targets)}"))
        elif sum(weights) != 100:
            found.append((alias, f"weights must sum to 100, got {sum(weights)} ({dict(targets)})"))
        if known is not None:
            if adapter_name_key(alias) in known:
                found.append((alias, "shadows the adapter of the same name; pick an alias name no adapter has"))
            unknown = sorted(target for target in targets if adapter_name_key(target) not in known)
            if unknown:
                found.append((alias, f"targets {', '.join(map(repr, unknown))}, which is not an adapter of this endpoint"))
    return found


def tenant_name_problems(tenant: object) -> list[str]:
    """What is wrong with `tenant` as a tenant name (empty when it is fine): the characters of a
    SageMaker name, at most 63 of them, so it can sit in names and messages as it is."""
    if not isinstance(tenant, str) or not SAGEMAKER_NAME_PATTERN.fullmatch(tenant) or len(tenant) > SAGEMAKER_NAME_MAX_LENGTH:
        return [f"tenant {tenant!r} must be 1 to {SAGEMAKER_NAME_MAX_LENGTH} letters, digits and inner hyphens"]
    return []


def _tenants_from_document(raw: object, locations: list[object]) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """The ``tenants`` key of a version-2 serving reference: tenant -> non-empty list of URLs, each
    one of the reference's adapter locations; tenant names unique ignoring case."""
    if not isinstance(raw, dict) or not raw:
        return (), ["serving.tenants must map each tenant to a non-empty list of its adapter locations (s3:// URLs)"]
    problems: list[str] = []
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for tenant, urls in raw.items():
        problems += [f"serving.tenants: {message}" for message in tenant_name_problems(tenant)]
        if isinstance(tenant, str):
            if tenant.lower() in seen:
                problems.append(f"serving.tenants: tenant {tenant!r} is listed twice (tenant names compare ignoring case)")
            seen.add(tenant.lower())
        if not isinstance(urls, list) or not urls or not all(isinstance(url, str) for url in urls):
            problems.append(f"serving.tenants.{tenant}: must be a non-empty list of s3:// URLs")
            continue
        for url in urls:
            if url not in locations:
                problems.append(f"serving.tenants.{tenant}: {url!r} is not one of serving.adapter_locations")
            pairs.append((tenant, url))
    owners: dict[str, list[str]] = {}
    for tenant, url in pairs:
        owners.setdefault(url, []).append(tenant)
    problems += [
        f"serving.tenants: {url!r} is assigned to {len(listed)} tenants ({', '.join(sorted(map(repr, listed)))}); a location has one"
        for url, listed in owners.items()
        if len({tenant.lower() for tenant in listed}) > 1
    ]
    return tuple(sorted(pairs)), problems


def _lookup(aliases: Mapping[str, Mapping[str, int]], name: str) -> Mapping[str, int] | None:
    for alias, targets in aliases.items():
        if adapter_name_key(alias) == adapter_name_key(name):
            return targets
    return None


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _get(document: object, key: str) -> object:
    return document.get(key) if isinstance(document, dict) else None
