"""`AdapterService`: several `MultiAdapterEndpoint` cells, each in its own stack, as one service.

Each cell is an independent endpoint with the same base model, serving options and monitoring,
so deploying one cell's stack can never touch another's and a bad upgrade or instance reaches
only the tenants of one cell. Every adapter lives in exactly one cell, chosen by its family (the
name without ``-vN``) with the placement rule clients share (`contract.cell_placement`): a pin,
else the committed placement file, else rendezvous hashing. So every version of a family and
its aliases sit in one cell, and adding a cell moves no recorded family.

One SSM parameter (`discovery_parameter_name`) holds the service record
(`contract.service_record`): each cell's endpoint record and the families placed other than by
the hash. `AdapterClient.from_parameter` reads it and calls each adapter on its cell.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import reduce
from typing import Any

import jsii
from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct, IValidation

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.contract.adapter_names import adapter_name_key
from cdk_adapters.contract.cell_placement import Placement, PlacementRecord, cell_for, cell_names, family_of, place
from cdk_adapters.contract.service_record import ServiceRecord, placement_deviations
from cdk_adapters.endpoint.components import AdapterInferenceComponent
from cdk_adapters.endpoint.discovery_parameter import publish_record
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from cdk_adapters.endpoint.invoke_grant import granted_list_problems
from cdk_adapters.problems import ConfigurationError, Problem, raise_if_any
from cdk_adapters.service.wave_gate import WaveGate, bake_time_problems

ENDPOINT_ID = "Serving"
"""Each cell's endpoint construct ID in its stack (the single-endpoint example app's too)."""
_STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,110}$")


_PlaceCache = tuple[tuple[object, ...], tuple[Placement | None, list[Problem]], dict[str, str] | None]
"""What `AdapterService._place` computed, for which state, and the service record's placement map."""


@dataclass(frozen=True)
class ServiceCell:
    """One cell: its name in the placement rule, its stack and its endpoint."""

    name: str
    stack: Stack
    endpoint: MultiAdapterEndpoint


class AdapterService(Construct):
    """N cells (endpoints, one stack each) serving one catalogue of adapters, placed by family.

    Add it to an app (or a stage): it creates the stacks ``<stack_name_prefix>-cell-0`` ... and
    ``<stack_name_prefix>-service``, which holds the service record.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cells: int,
        endpoint_props: Callable[[Stack, str], Mapping[str, Any]],
        placement: PlacementRecord | None = None,
        pins: Mapping[str, str] | None = None,
        cell_cap: int | None = None,
        stack_name_prefix: str | None = None,
        stack_props: Mapping[str, Any] | None = None,
        discovery_parameter_name: str | None = None,
        first_wave: int = 1,
        bake_time: Duration | None = None,
        hashed_over: int | None = None,
    ) -> None:
        """
        :param cells: how many cells (endpoints); at least 1. A cell's name (``cell-<i>``) is its
            identity in the placement rule, so cells are only ever added at the end.
        :param endpoint_props: the `MultiAdapterEndpoint` keyword arguments of one cell, built in
            that cell's stack (imported buckets, keys and topics belong to the stack using them);
            called with the stack and the cell's name. Every cell should get the same options.
        :param placement: the committed placement file (`PlacementRecord.from_json`): every
            recorded family stays in its cell. Default: none, every family hashed.
        :param pins: adapter or family name -> cell, e.g. a noisy or regulated tenant alone in its
            own cell; wins over the placement file. `add_adapter(cell=...)` pins too. Default none.
        :param cell_cap: most adapters a cell may hold; synth fails naming a cell over it and its
            count. Default: no cap.
        :param stack_name_prefix: the stacks' names start with it. Default: `id`.
        :param stack_props: further `Stack` options for every stack (``env``, ``description``,
            ``termination_protection``, ...). Default none.
        :param discovery_parameter_name: SSM parameter of the service record. Default
            ``/cdk-adapters/<stack_name_prefix>/service``.
        :param first_wave: how many cells (the first ones) an upgrade reaches first. Every other
            cell's stack depends on theirs, so ``cdk deploy --all`` deploys them first; deploy
            them alone, bake with ``cdk-adapters bake``, then deploy the rest (docs/cells.md).
            Default 1.
        :param bake_time: hold every later cell's upgrade in CloudFormation until the first wave's
            alarms stayed quiet this long, and fail it when one fires (`WaveGate`; 1 to 50
            minutes). Deploy with ``cdk deploy --all --concurrency <cells>`` so the later cells
            bake side by side. Default None: no gate; bake between deploys with ``cdk-adapters bake``.
        :param hashed_over: families placed by no pin and no record hash over the first this many
            cells. Keep it at the old count when adding cells, and no such family (a tenant
            stack's, which the placement file never holds) moves; new cells then get pinned,
            recorded and rebalanced families. Default None: every cell.
        """
        super().__init__(scope, id)
        prefix = stack_name_prefix or id
        self._subject = f"AdapterService {self.node.path!r}"
        problems = _option_problems(self._subject, cells, cell_cap, prefix, first_wave, bake_time, hashed_over)
        raise_if_any(problems, heading=f"{self._subject} is misconfigured")
        self._start_placement(cell_cap, placement, hashed_over)
        extra = dict(stack_props or {})
        self.cells: list[ServiceCell] = []
        for index, name in enumerate(cell_names(cells)):
            stack = Stack(self, f"Cell{index}", stack_name=f"{prefix}-{name}", **extra)
            self.cells.append(ServiceCell(name, stack, MultiAdapterEndpoint(stack, ENDPOINT_ID, **endpoint_props(stack, name))))
        self.waves: list[list[ServiceCell]] = [w for w in (self.cells[:first_wave], self.cells[first_wave:]) if w]
        """The cells an upgrade reaches first, then the rest."""
        self.wave_gates: list[WaveGate] = self._order_waves(bake_time)
        """Each later cell's gate (with `bake_time`)."""
        self._pin_all(pins or {})
        self.stack = Stack(self, "Service", stack_name=f"{prefix}-service", **extra)
        """Holds the service record; it depends on every cell, so it deploys after them."""
        self.discovery_parameter_name = discovery_parameter_name or f"/cdk-adapters/{prefix}/service"
        self.discovery_parameter: ssm.StringParameter = self._publish(prefix)
        self.node.add_validation(_PlacementValidation(self))

    def _start_placement(self, cell_cap: int | None, placement: PlacementRecord | None, hashed_over: int | None) -> None:
        """The placement's settings and the state it keeps as adapters and aliases are added."""
        self.hashed_over = hashed_over
        self.cell_cap = cell_cap
        self.placement_file = placement or PlacementRecord()
        self._pins: dict[str, str] = {}
        """Family -> its pinned cell."""
        self._pin_names: dict[str, str] = {}
        """The pins as given (adapter or family name -> cell), for `place`, which finds each family itself:
        a family's own name may end in -v<N> (adapter acme-v2-v1 is family acme-v2)."""
        self._placed: dict[str, str] = {}
        self._homes_by_key: dict[str, str] = {}
        """Adapter or alias key -> its cell, kept as they are added (every add_alias and cell_of asks)."""
        self._family_cells: dict[str, str] = {}
        """Family -> its cell, as placed so far (every version of a family goes where the first went)."""
        self._placed_cache: _PlaceCache | None = None
        self._aliases: dict[str, dict[str, int]] = {}
        self._alias_cells: dict[str, str] = {}
        """Alias key -> the cell that publishes it."""

    def _pin_all(self, pins: Mapping[str, str]) -> None:
        problems: list[Problem] = []
        for pinned, where in pins.items():
            try:
                self._pin(pinned, where, "pins")
            except ConfigurationError as error:
                problems += error.problems
        raise_if_any(problems, heading=f"{self._subject} cannot pin its adapters")

    def _publish(self, prefix: str) -> ssm.StringParameter:
        """The service record's parameter, in the service stack, after every cell."""
        for each in self.cells:
            self.stack.add_stack_dependency(each.stack, "the service record names the cell's endpoint")
        return publish_record(
            self.stack,
            "ServiceRecord",
            parameter_name=self.discovery_parameter_name,
            record=self.service_record,
            description=f"cdk-adapters service record (cells, placement rule, pins) of {prefix}",
        )

    def _order_waves(self, bake_time: Duration | None) -> list[WaveGate]:
        """Every later cell's stack after the first wave's; with `bake_time`, a gate in each."""
        gates = []
        watched = [cell.endpoint.prefix for cell in self.waves[0]]
        for cell in (cell for wave in self.waves[1:] for cell in wave):
            for first in self.waves[0]:
                cell.stack.add_stack_dependency(first.stack, "an upgrade reaches the first wave first")
            if bake_time is not None:
                gates.append(
                    WaveGate(
                        cell.stack,
                        "WaveGate",
                        cell=cell.name,
                        watched_prefixes=watched,
                        bake_time=bake_time,
                        model=cell.endpoint.model,
                        tier_models=[tier.model for tier in cell.endpoint.rank_tiers],
                        log_settings=cell.endpoint.log_settings,
                    )
                )
        return gates

    # ------------------------------------------------------------------ placement

    def cell(self, name: str) -> ServiceCell:
        """The cell named `name` (``cell-0`` ...)."""
        for cell in self.cells:
            if cell.name == name:
                return cell
        raise KeyError(f"{self._subject} has no cell {name!r} (its cells: {', '.join(c.name for c in self.cells)})")

    def cell_of(self, name: str) -> str:
        """The cell serving `name`, an adapter or alias added to this service."""
        homes = self._homes_by_key
        if adapter_name_key(name) not in homes:
            raise KeyError(f"{name!r} is no adapter or alias added to {self._subject}")
        return homes[adapter_name_key(name)]

    def place_adapter(self, name: str, *, cell: str | None = None) -> ServiceCell:
        """The cell adapter `name` goes to, recorded for the service record and the synth checks:
        `cell` (a pin), else its family's pin or cell in this service, else the placement file,
        else the hash. `add_adapter` calls it; call it yourself to add the adapter through the
        cell's endpoint (``service.place_adapter(name).endpoint.add_adapter(...)``)."""
        family = family_of(name)
        if cell is not None:
            self._pin(name, cell, "add_adapter.cell")
        chosen = (
            self._pins.get(family)
            or self._family_cells.get(family)
            or cell_for(family, self._names, recorded=self.placement_file.families, hashed_over=self.hashed_over)
        )
        self._placed[name] = self._family_cells[family] = self._homes_by_key[adapter_name_key(name)] = chosen
        return self.cell(chosen)

    def add_adapter(
        self, name: str, *, artifact: AdapterArtifact, cell: str | None = None, **options: Any
    ) -> AdapterInferenceComponent:
        """Add adapter `name` to the cell placement chooses (`place_adapter`); `options` are
        `MultiAdapterEndpoint.add_adapter`'s."""
        return self.place_adapter(name, cell=cell).endpoint.add_adapter(name, artifact=artifact, **options)

    def add_alias(self, alias: str, targets: Mapping[str, int] | str) -> None:
        """A weighted alias over adapters of this service (a name: all of the traffic), published by
        the cell that serves them. Its targets must sit in one cell (a client calls one endpoint
        per alias; pin them there), and its name may be no adapter's nor another alias's."""
        weights = {targets: 100} if isinstance(targets, str) else dict(targets)
        homes = self._homes_by_key
        cells = sorted({homes.get(adapter_name_key(target)) or f"{target!r}, not added" for target in weights})
        subject = f"alias {alias!r} of {self._subject}"
        problems = []
        if adapter_name_key(alias) in homes:
            what = "alias" if adapter_name_key(alias) in self._alias_cells else "adapter"
            problems.append(
                Problem(
                    subject, "name", f"is already the name of an {what} of this service (in {homes[adapter_name_key(alias)]})"
                )
            )
        if len(cells) != 1 or cells[0] not in self._names:
            problems.append(
                Problem(
                    subject,
                    "targets",
                    f"its targets must be adapters added to one cell first; they are in {', '.join(cells)} "
                    "(pin their families to one cell: add_adapter(cell=...), or a manifest row's cell:)",
                )
            )
        raise_if_any(problems)
        self.cell(cells[0]).endpoint.add_alias(alias, targets)  # its own checks (weights, shadowing) first
        self._aliases[alias] = weights
        self._alias_cells[adapter_name_key(alias)] = self._homes_by_key[adapter_name_key(alias)] = cells[0]

    @property
    def placement(self) -> Placement:
        """Every added adapter's cell, and the placement file to commit after this synth; raises
        `ConfigurationError` with every placement problem (a cell over its cap, ...)."""
        placed, problems = self._place()
        if placed is None:
            raise ConfigurationError(problems, heading=f"{self._subject} cannot place its adapters")
        return placed

    def service_record(self) -> ServiceRecord:
        """What the service's discovery parameter holds (rendered at synth): each cell's endpoint
        record without its serving reference (clients ignore it; each cell publishes its own)."""
        records = {cell.name: replace(cell.endpoint.discovery_record(), serving=None) for cell in self.cells}
        parameters = {cell.name: cell.endpoint.discovery_parameter_name for cell in self.cells}
        return ServiceRecord(records, self._deviations(), hashed_over=self.hashed_over, parameters=parameters)

    # ------------------------------------------------------------------ grants

    def grant_invoke(self, grantee: iam.IGrantable, adapters: Sequence[str] | None = None) -> iam.Grant:
        """Let `grantee` invoke `adapters` (adapters or aliases) on the cells that serve them, and
        only there: each involved cell's endpoint and those adapters' components. Default: every
        adapter of every cell, present and future."""
        raise_if_any(granted_list_problems(adapters, self._subject, leave_out="every adapter of every cell"))
        if adapters is None:
            grants = [cell.endpoint.grant_invoke(grantee) for cell in self.cells]
        else:
            by_cell: dict[str, list[str]] = {}
            homes = self._homes_by_key
            unknown = [
                Problem(self._subject, "grant_invoke.adapters", f"{name!r} is no adapter or alias added to this service")
                for name in adapters
                if adapter_name_key(name) not in homes
            ]
            raise_if_any(unknown)
            for name in adapters:
                by_cell.setdefault(homes[adapter_name_key(name)], []).append(name)
            grants = [self.cell(where).endpoint.grant_invoke(grantee, names) for where, names in sorted(by_cell.items())]
        return reduce(lambda left, right: left.combine(right), grants)

    def grant_read_discovery(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` read the service record (what `AdapterClient.from_parameter` does)."""
        return self.discovery_parameter.grant_read(grantee)

    # ------------------------------------------------------------------ internals

    @property
    def _names(self) -> list[str]:
        return [cell.name for cell in self.cells]

    def _pin(self, name: str, cell: str, field: str) -> None:
        family = family_of(name)
        problems = []
        if cell not in self._names:
            problems.append(f"pins it to {cell!r}, which is not a cell of this service ({', '.join(self._names)})")
        elif self._pins.get(family, cell) != cell:
            problems.append(f"is pinned to {self._pins[family]!r} already; a family lives in one cell")
        elif self._family_cells.get(family, cell) != cell:
            problems.append("has adapters in another cell already; pin the family before adding its first adapter")
        if problems:
            raise ConfigurationError([Problem(f"adapter family {family!r} of {self._subject}", field, p) for p in problems])
        self._pins[family] = cell
        self._pin_names[name] = cell

    def _place(self) -> tuple[Placement | None, list[Problem]]:
        """`place` over everything added, computed once per state (synth asks several times)."""
        state = (len(self._placed), len(self._pins), len(self._aliases), self.cell_cap, id(self.placement_file), self.hashed_over)
        if self._placed_cache is None or self._placed_cache[0] != state:
            placed = place(
                self._placed,
                self._names,
                record=self.placement_file,
                pins=self._pin_names,
                cell_cap=self.cell_cap,
                aliases=self._aliases,
                subject=self._subject,
                hashed_over=self.hashed_over,
            )
            self._placed_cache = (state, placed, None)
        return self._placed_cache[1]

    def _deviations(self) -> dict[str, str]:
        """The service record's ``placement`` map: the families placed other than by the hash."""
        self._place()
        assert self._placed_cache is not None
        state, placed, deviations = self._placed_cache
        if deviations is None:
            record = placed[0].record if placed[0] is not None else self.placement_file
            deviations = placement_deviations(self._names, record, self._pin_names, self.hashed_over)
            self._placed_cache = (state, placed, deviations)
        return deviations


def _option_problems(
    subject: str, cells: object, cell_cap: object, prefix: str, first_wave: object, bake_time: object, hashed_over: object
) -> list[Problem]:
    problems = []
    if bake_time is not None:
        problems += [Problem(subject, "bake_time", message) for message in bake_time_problems(bake_time)]
    if hashed_over is not None and (
        isinstance(hashed_over, bool)
        or not isinstance(hashed_over, int)
        or not isinstance(cells, int)
        or not 1 <= hashed_over <= cells
    ):
        problems.append(
            Problem(subject, "hashed_over", f"must be a whole number of cells from 1 to {cells}, got {hashed_over!r}")
        )
    if isinstance(first_wave, bool) or not isinstance(first_wave, int) or first_wave < 1:
        problems.append(Problem(subject, "first_wave", f"must be a whole number of cells >= 1, got {first_wave!r}"))
    elif isinstance(cells, int) and cells > 1 and first_wave >= cells:
        problems.append(Problem(subject, "first_wave", f"is {first_wave} of {cells} cells; it must leave a later wave"))
    if isinstance(cells, bool) or not isinstance(cells, int) or cells < 1:
        problems.append(Problem(subject, "cells", f"must be a whole number >= 1, got {cells!r}"))
    if cell_cap is not None and (isinstance(cell_cap, bool) or not isinstance(cell_cap, int) or cell_cap < 1):
        problems.append(Problem(subject, "cell_cap", f"must be a whole number >= 1, or None for no cap, got {cell_cap!r}"))
    if not _STACK_NAME.match(prefix):
        problems.append(
            Problem(subject, "stack_name_prefix", f"{prefix!r} must start with a letter and hold only letters, digits and '-'")
        )
    return problems


@jsii.implements(IValidation)
class _PlacementValidation:
    """At synth: the placement of every added adapter passes `place` (caps, aliases, removed cells)."""

    def __init__(self, service: AdapterService) -> None:
        self._service = service

    def validate(self) -> list[str]:
        service = self._service
        _, problems = service._place()
        for cell in service.cells:
            for name in cell.endpoint.adapter_component_names():
                if service._placed.get(name) != cell.name:
                    problems.append(
                        Problem(
                            f"adapter {name!r} of {service._subject}",
                            "cell",
                            f"was added to {cell.name}'s endpoint directly, where the service record does not send its "
                            "calls; add it with service.add_adapter (or place_adapter(name) first)",
                        )
                    )
        return [str(problem) for problem in problems]
