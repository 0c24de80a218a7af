"""Putting a checked manifest into an `AdapterService`: every row in the cell placement chooses.

Each cell gets the manifest's base model, serving limits and adapter locations, and the rows
placed in it, wired exactly as `endpoint_from_manifest` wires one endpoint; a row's ``cell:``
pins its family. The manifest knows the service, never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from os import PathLike
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_kms as kms
from constructs import Construct

from cdk_adapters.contract.cell_placement import PlacementRecord
from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.manifest.gating import ManifestPlan
from cdk_adapters.manifest.wiring import add_manifest_adapters, endpoint_props, gated_plan
from cdk_adapters.monitoring.alarms import MonitoringAlarms
from cdk_adapters.problems import ConfigurationError, Problem, raise_if_any
from cdk_adapters.service.service import ENDPOINT_ID, AdapterService


def service_from_manifest(
    scope: Construct,
    id: str,
    *,
    manifest: str | PathLike[str] | ManifestPlan,
    cells: int,
    props: Callable[[Stack, str], Mapping[str, Any]] | None = None,
    vllm: VllmOptions | None = None,
    encryption_key: kms.IKey | None = None,
    placement: PlacementRecord | None = None,
    **service_options: Any,
) -> AdapterService:
    """A service of `cells` cells serving an adapter manifest: every row in one cell, every alias
    in the cell of its targets.

    :param props: every other `MultiAdapterEndpoint` option of a cell (``instances``, ``image``,
        ...), built in the cell's stack; called with the stack and the cell's name.
    :param placement: the committed placement file; default none (every family hashed).
    :param service_options: `AdapterService`'s ``cell_cap``, ``stack_name_prefix``,
        ``stack_props`` and ``discovery_parameter_name``.
    """
    plan = gated_plan(manifest, vllm)

    def cell_props(stack: Stack, cell: str) -> dict[str, Any]:
        extra = dict(props(stack, cell)) if props is not None else {}
        if plan.alarm_overrides and extra.get("alarms") is None:
            extra["alarms"] = MonitoringAlarms()
        weights_id = f"{ENDPOINT_ID}BaseModelWeights"
        return {**endpoint_props(stack, plan, vllm=vllm, weights_id=weights_id, encryption_key=encryption_key), **extra}

    service = AdapterService(
        scope, id, cells=cells, endpoint_props=cell_props, placement=placement, pins=plan.manifest.cell_pins, **service_options
    )
    shares: dict[str, list[str]] = {}
    for adapter in plan.adapters:
        shares.setdefault(service.place_adapter(adapter.name).name, []).append(adapter.name)
    for cell in service.cells:
        add_manifest_adapters(cell.endpoint, plan.only(shares.get(cell.name, ())))
    problems: list[Problem] = []
    for alias, targets in plan.aliases.items():
        try:
            service.add_alias(alias, targets)
        except ConfigurationError as error:
            problems += error.problems
    raise_if_any(problems, heading=f"cannot add the manifest's aliases to {service.node.path!r}")
    return service
