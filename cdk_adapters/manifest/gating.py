"""The manifest's compatibility gate: every adapter checked, every problem at once, before any construct.

`plan_manifest` is what synth and `cdk-adapters validate MANIFEST` run. It returns a
`ManifestPlan`: the adapters with their facts, and the serving limits vLLM needs (including the
derived ``max_lora_rank`` when the manifest leaves it unset). It imports no aws-cdk-lib.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from cdk_adapters.contract.discovery import alias_problems
from cdk_adapters.endpoint.names import validate_adapter_name
from cdk_adapters.gate import (
    AcknowledgedFinding,
    Acknowledgment,
    AdapterFacts,
    BaseModelFacts,
    CoHostedAdapter,
    Reference,
    check_adapter_facts,
    covering_max_lora_rank,
    split_acknowledged,
)
from cdk_adapters.gate.adapter_contents import AdapterContents
from cdk_adapters.gate.check import check_adapter_contents
from cdk_adapters.gate.checks.co_hosted import IDENTICAL_TARGET_MODULES, UNIQUE_NAMES, VERSION_SUFFIX_CHECK
from cdk_adapters.manifest.loader import LoadedManifest, load_manifest, load_valid_rows
from cdk_adapters.manifest.lock import LockEntry
from cdk_adapters.manifest.schema import AdapterRow, BaseModelSpec, Manifest
from cdk_adapters.manifest.tier_record import load_tier_record, place_on_tiers, tier_record_path_for
from cdk_adapters.problems import ConfigurationError, Problem, raise_if_any

if TYPE_CHECKING:
    from cdk_adapters.endpoint.rank_tiers import RankTier
    from cdk_adapters.hosting.vllm_options import VllmOptions


@dataclass(frozen=True)
class PlannedAdapter:
    """One manifest row after the gate: its facts and either a local directory or a lock entry."""

    row: AdapterRow
    facts: AdapterFacts
    local_dir: Path | None = None
    lock_entry: LockEntry | None = None

    @property
    def name(self) -> str:
        return self.row.name


@dataclass(frozen=True)
class ManifestPlan:
    """A manifest that passed the gate, ready to be added to a `MultiAdapterEndpoint`."""

    loaded: LoadedManifest
    base: BaseModelFacts
    adapters: tuple[PlannedAdapter, ...]
    max_lora_rank: int
    acknowledged: tuple[AcknowledgedFinding, ...] = ()
    """Findings the rows acknowledged (rule id + reason): reported, not failed."""
    tower_connector_lora: bool | None = None
    """The engine's ``enable_tower_connector_lora`` the adapters were checked for (None: it follows
    ``allow_vision_modules``, as the construct renders it)."""
    tiers: dict[str, int] = field(default_factory=dict)
    """Adapter -> the rank tier it attaches to (pins and the tier record honoured); empty: one tier."""

    @property
    def reference(self) -> Reference:
        """What every adapter was checked against, with the rank limit resolved (the largest tier's)."""
        rank = max(self.tier_ranks, default=self.max_lora_rank)
        return Reference(self.base, rank, self.manifest.base_model.allow_vision_modules, self.tower_connector_lora)

    @property
    def tier_ranks(self) -> tuple[int, ...]:
        """The rank tiers' ``max_lora_rank``, the first first; empty: one tier (`max_lora_rank`)."""
        return self.manifest.serving.tier_ranks

    def tier_scaling(self) -> dict[int, tuple[int, int]]:
        """Tier rank -> (min_copies, max_copies), for the tiers the manifest autoscales."""
        return {
            tier.max_lora_rank: (tier.min_copies, tier.max_copies)
            for tier in self.manifest.serving.tiers or []
            if tier.min_copies is not None and tier.max_copies is not None
        }

    def rank_tiers(self) -> list[RankTier]:
        """The tiers after the first, as the endpoint takes them (`MultiAdapterEndpoint(rank_tiers=...)`)."""
        from cdk_adapters.endpoint.rank_tiers import RankTier

        serving = self.manifest.serving  # a later tier's slots default to serving's, never to the first tier's
        tiers = []
        for tier in (serving.tiers or [])[1:]:
            loras, cpu = serving.tier_slots(tier)
            tiers.append(
                RankTier(max_lora_rank=tier.max_lora_rank, max_loras=loras, max_cpu_loras=cpu, copy_count=tier.copies or 1)
            )
        return tiers

    @property
    def manifest(self) -> Manifest:
        return self.loaded.manifest

    @property
    def max_loras(self) -> int:
        """The first tier's (the endpoint's own) GPU-resident adapters."""
        first = self.manifest.serving.tiers[0] if self.manifest.serving.tiers else None
        return first.max_loras if first is not None and first.max_loras is not None else self.manifest.serving.max_loras

    @property
    def max_cpu_loras(self) -> int | None:
        first = self.manifest.serving.tiers[0] if self.manifest.serving.tiers else None
        return (
            first.max_cpu_loras if first is not None and first.max_cpu_loras is not None else self.manifest.serving.max_cpu_loras
        )

    @property
    def alarm_overrides(self) -> dict[str, dict[str, object]]:
        """Adapter -> its alarm overrides (empty: the defaults), for the rows that opt into alarms."""
        return {adapter.name: adapter.row.alarms.overrides() for adapter in self.adapters if adapter.row.alarms is not None}

    def only(self, names: Iterable[str]) -> ManifestPlan:
        """This plan with only the adapters `names` (in manifest order), e.g. one cell's share;
        aliases are left to whoever adds them."""
        kept = set(names)
        return replace(self, adapters=tuple(adapter for adapter in self.adapters if adapter.name in kept))

    @property
    def canary_adapters(self) -> tuple[str, ...]:
        """The rows marked ``canary: true``, in manifest order."""
        return tuple(adapter.name for adapter in self.adapters if adapter.row.canary)

    def canary_plan(self) -> ManifestPlan:
        """This plan with only the canary rows (and no aliases: they are the main endpoint's)."""
        if not self.canary_adapters:
            raise ConfigurationError(
                [
                    Problem(
                        f"manifest {self.loaded.path}", "adapters", "marks no row 'canary: true'; a canary serves at least one"
                    )
                ],
                heading="cannot plan the canary",
            )
        manifest = self.manifest.model_copy(update={"aliases": {}})
        return replace(
            self,
            loaded=replace(self.loaded, manifest=manifest),
            adapters=tuple(adapter for adapter in self.adapters if adapter.row.canary),
        )

    @property
    def aliases(self) -> dict[str, dict[str, int]]:
        """Alias -> {adapter: weight in percent}, checked: what the discovery record publishes."""
        return self.manifest.alias_weights

    def vllm_options(self, options: VllmOptions | None = None) -> VllmOptions:
        """`options` (default `VllmOptions()`) with the manifest's LoRA limits put in."""
        from cdk_adapters.hosting.vllm_options import VllmOptions

        return replace(
            options or VllmOptions(),
            max_loras=self.max_loras,
            max_cpu_loras=self.max_cpu_loras,
            max_lora_rank=self.max_lora_rank,
        )


def base_facts(spec: BaseModelSpec) -> BaseModelFacts:
    """The gate's base facts as the manifest states them (the vision-language ones included, so the
    rules that need the base's architecture and strategy run at synth too)."""
    return BaseModelFacts(
        model_id=spec.id,
        revision=spec.revision,
        module_names=frozenset(spec.module_names),
        hidden_size=spec.hidden_size,
        vision_language=spec.vision_language,
        module_shapes=None
        if spec.module_shapes is None
        else frozenset((leaf, out, in_) for leaf, shapes in spec.module_shapes.items() for out, in_ in shapes),
        architecture=spec.architecture,
        vision_tower_type=spec.vision_tower_type,
        vision_feature_select_strategy=spec.vision_feature_select_strategy,
    )


def manifest_reference(manifest: Manifest, tower_connector_lora: bool | None = None) -> Reference:
    """What the manifest's adapters are checked against (``max_lora_rank`` None: derived).

    :param tower_connector_lora: the engine's `VllmOptions.enable_tower_connector_lora`; None
        (its default) means on exactly when the manifest allows vision modules.
    """
    tiers = manifest.serving.tier_ranks
    return Reference(
        base=base_facts(manifest.base_model),
        max_lora_rank=tiers[-1] if tiers else manifest.serving.max_lora_rank,
        allow_vision_modules=manifest.base_model.allow_vision_modules,
        tower_connector_lora=tower_connector_lora,
    )


def check_manifest(
    loaded: LoadedManifest, *, tower_connector_lora: bool | None = None
) -> tuple[list[Problem], ManifestPlan | None]:
    """Every open problem in the manifest and its adapters, and the plan when there are none.

    `tower_connector_lora` is the engine's setting the rows are checked for (`manifest_reference`).

    Findings of a rule a row acknowledges (``acknowledge: {rule, reason}``) are not problems;
    the plan lists them as `ManifestPlan.acknowledged`.
    """
    manifest = loaded.manifest
    reference = manifest_reference(manifest, tower_connector_lora)
    problems: list[Problem] = []
    planned: list[PlannedAdapter] = []
    for row in manifest.adapters:
        row_problems, adapter = _check_row(row, loaded, reference)
        problems += row_problems
        if adapter is not None:
            planned.append(adapter)
    acknowledgments = _acknowledgments(manifest.adapters)
    problems += _co_hosted_problems(manifest.adapters, planned, acknowledgments)
    problems, acknowledged = split_acknowledged(_deduplicated(problems), acknowledgments)
    problems += _alias_problems(manifest)
    if problems:
        return _deduplicated(problems), None
    assert reference.base is not None, "manifest_reference always states the manifest's base"
    limit = manifest.serving.tier_ranks[0] if manifest.serving.tiers else reference.max_lora_rank
    rank = limit if limit is not None else covering_max_lora_rank(adapter.facts for adapter in planned)
    tiers, tier_problems = _tier_placement(loaded, planned, manifest.serving.tier_ranks or (rank,))
    if tier_problems:
        return tier_problems, None
    return [], ManifestPlan(
        loaded=loaded,
        base=reference.base,
        adapters=tuple(planned),
        max_lora_rank=rank,
        acknowledged=tuple(acknowledged),
        tower_connector_lora=tower_connector_lora,
        tiers=tiers,
    )


def _tier_placement(
    loaded: LoadedManifest, planned: list[PlannedAdapter], tier_ranks: tuple[int, ...]
) -> tuple[dict[str, int], list[Problem]]:
    """Each row's rank tier, checked against the committed tier record (`tier_record`); nothing to
    place or check for one tier without pins or a record."""
    recorded = load_tier_record(tier_record_path_for(loaded.path))
    pins = {adapter.name: adapter.row.tier for adapter in planned if adapter.row.tier is not None}
    if len(tier_ranks) == 1 and not pins and not recorded:
        return {}, []
    rows = [(adapter.name, adapter.facts.max_rank, adapter.row.tier) for adapter in planned]
    return place_on_tiers(rows, tier_ranks, recorded)


def _check_row(row: AdapterRow, loaded: LoadedManifest, reference: Reference) -> tuple[list[Problem], PlannedAdapter | None]:
    """One row's problems, and the row as planned when its facts are known (from the lock or its files)."""
    subject = f"adapter '{row.name}'"
    problems = list(validate_adapter_name(row.name, subject))
    if row.is_s3:
        problems += _location_problems(row, loaded.manifest, subject)
        entry = loaded.lock.adapters.get(row.name)
        if entry is None:
            problems.append(
                Problem(
                    subject,
                    "source",
                    f"has no entry in {loaded.lock_path}; run `cdk-adapters lock --manifest {loaded.path}` "
                    "(or publish it with `cdk-adapters publish`) and commit the lock file",
                )
            )
            return problems, None
        if entry.uri != row.source:
            problems.append(
                Problem(
                    subject,
                    "source",
                    f"is {row.source} but its lock entry records {entry.uri}; a published name never "
                    "moves: publish a new version (-v<N+1>) or run `cdk-adapters lock` if the row is right",
                )
            )
            return problems, None
        facts = entry.facts
        problems += check_adapter_facts(row.name, facts, reference)
        return problems, PlannedAdapter(row=row, facts=facts, lock_entry=entry)
    directory = loaded.resolve_local(row.source)
    if not directory.is_dir():
        problems.append(
            Problem(subject, "source", f"local directory {directory} does not exist (paths are relative to the manifest)")
        )
        return problems, None
    contents = AdapterContents.from_dir(directory)
    problems += check_adapter_contents(row.name, contents, reference)
    local_facts = AdapterFacts.from_contents(contents)
    return problems, None if local_facts is None else PlannedAdapter(row=row, facts=local_facts, local_dir=directory)


def _co_hosted_problems(
    rows: Iterable[AdapterRow], planned: list[PlannedAdapter], acknowledgments: dict[str, Acknowledgment]
) -> list[Problem]:
    """The rules across rows: unique names and version suffixes on every row, identical target
    modules on the planned ones."""
    every_row = [CoHostedAdapter(name=row.name, target_modules=(), acknowledged=_rules(acknowledgments, row)) for row in rows]
    return (
        UNIQUE_NAMES(every_row)
        + VERSION_SUFFIX_CHECK(every_row)
        + IDENTICAL_TARGET_MODULES(
            [
                CoHostedAdapter(
                    name=adapter.name,
                    target_modules=adapter.facts.target_modules,
                    acknowledged=_rules(acknowledgments, adapter.row),
                )
                for adapter in planned
            ]
        )
    )


def plan_manifest(loaded: LoadedManifest, *, tower_connector_lora: bool | None = None) -> ManifestPlan:
    """`check_manifest`, raising one `ConfigurationError` with every problem."""
    problems, plan = check_manifest(loaded, tower_connector_lora=tower_connector_lora)
    raise_if_any(problems, heading=f"manifest {loaded.path} failed the compatibility gate")
    assert plan is not None
    return plan


def plan_manifest_file(
    path: Path | str | None = None, *, lock_path: Path | None = None, tower_connector_lora: bool | None = None
) -> ManifestPlan:
    """Load, schema-check and gate the manifest at `path`; one `ConfigurationError` with every problem.

    `tower_connector_lora` is the engine's `VllmOptions.enable_tower_connector_lora` (None: on
    with ``allow_vision_modules``): the rules about tower LoRA judge the engine that will serve.

    When some adapter rows fail the schema, the gate still runs on the rows that pass it (and the
    name rules on every row), so a user sees every problem of every row in one go.
    """
    try:
        loaded = load_manifest(path, lock_path=lock_path)
    except ConfigurationError as schema_error:
        partial = load_valid_rows(path, lock_path=lock_path)
        if partial is None:
            raise
        problems = list(schema_error.problems) + check_manifest(partial.loaded, tower_connector_lora=tower_connector_lora)[0]
        all_names = [row.name for row in partial.loaded.manifest.adapters] + list(partial.rejected_names)
        for name in partial.rejected_names:
            problems += validate_adapter_name(name, f"adapter '{name}'")
        named = [CoHostedAdapter(name=name, target_modules=()) for name in all_names]
        problems += UNIQUE_NAMES(named) + VERSION_SUFFIX_CHECK(named)
        problems = split_acknowledged(problems, _acknowledgments(partial.loaded.manifest.adapters))[0]
        raise ConfigurationError(_deduplicated(problems), heading=schema_error.heading) from None
    return plan_manifest(loaded, tower_connector_lora=tower_connector_lora)


def _location_problems(row: AdapterRow, manifest: Manifest, subject: str) -> list[Problem]:
    """An ``s3://`` row must lie under a declared adapter location: the role reads by location."""
    if any(location.contains(row.source) for location in manifest.adapter_locations):
        return []
    declared = ", ".join(location.url for location in manifest.adapter_locations) or "none"
    return [
        Problem(
            subject,
            "source",
            f"{row.source} is outside every adapter location of the manifest (adapter_locations: {declared}); "
            "publish it under a declared prefix, or add its bucket prefix to adapter_locations",
        )
    ]


def _alias_problems(manifest: Manifest) -> list[Problem]:
    """Every alias names adapters of this manifest, with weights from 1 to 100 summing to 100, and
    shadows no adapter: the discovery record's one rule (`alias_problems`), checked before synth."""
    adapters = [row.name for row in manifest.adapters]
    return [
        Problem(f"alias '{alias}'", f"aliases.{alias}", message)
        for alias, message in alias_problems(manifest.alias_weights, adapters)
    ]


def _acknowledgments(rows: Iterable[AdapterRow]) -> dict[str, Acknowledgment]:
    """Subject -> the rule its row acknowledges and why."""
    found = {}
    for row in rows:
        given = row.acknowledgment
        if given is not None:
            assert given.reason is not None, "the manifest schema requires an acknowledgment's reason"
            found[f"adapter '{row.name}'"] = Acknowledgment(given.rule, given.reason)
    return found


def _rules(acknowledgments: dict[str, Acknowledgment], row: AdapterRow) -> frozenset[str]:
    acknowledgment = acknowledgments.get(f"adapter '{row.name}'")
    return frozenset({acknowledgment.rule}) if acknowledgment else frozenset()


def _deduplicated(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))


__all__ = [
    "ManifestPlan",
    "PlannedAdapter",
    "base_facts",
    "check_manifest",
    "manifest_reference",
    "plan_manifest",
    "plan_manifest_file",
]
