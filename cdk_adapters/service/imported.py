"""`ImportedAdapterService`: a tenant stack's view of an `AdapterService` deployed elsewhere.

It reads the service record at synth (a cached SSM lookup), and adds each adapter to the cell the
placement rule gives its family (`ServiceRecord.cell_of`, the function clients call), through an
`ImportedMultiAdapterEndpoint` of that cell read from the cell's own record (serving reference
included, so the gate checks the adapter against what that cell serves). The adapters live in the
tenant's stack; the platform's cells are not touched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce
from typing import Any

from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.contract.discovery import DiscoveryRecord, DiscoveryRecordError
from cdk_adapters.contract.service_record import ServiceRecord
from cdk_adapters.endpoint.components import AdapterInferenceComponent
from cdk_adapters.endpoint.discovery_parameter import PLACEHOLDER_NAME, lookup_parameter
from cdk_adapters.endpoint.imported import ImportedMultiAdapterEndpoint
from cdk_adapters.endpoint.invoke_grant import granted_list_problems
from cdk_adapters.problems import ConfigurationError, Problem, raise_if_any


class ImportedAdapterService(Construct):
    """An `AdapterService` deployed elsewhere; adapters added here go to the cell placement
    chooses and live in this stack (which needs an explicit account and region for the lookups)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        parameter_name: str,
        tenant: str | None = None,
        execution_role_arns: Mapping[str, str] | None = None,
    ) -> None:
        """
        :param parameter_name: the service record's SSM parameter (the service's
            ``discovery_parameter_name``).
        :param tenant: which of the platform's tenants this stack is, when the cells assign
            tenants locations (`ImportedMultiAdapterEndpoint`'s ``tenant``). Default None.
        :param execution_role_arns: cell -> its endpoint's execution role, needed only for local
            archives (this stack grants that role its asset objects). Default none.
        """
        super().__init__(scope, id)
        self._subject = f"imported AdapterService {self.node.path!r}"
        self.parameter_name = parameter_name
        self.tenant = tenant
        self._roles = dict(execution_role_arns or {})
        value = lookup_parameter(self, self._subject, parameter_name)
        self.lookup_pending = value is None
        """True on the first synth pass, before the context holds the service record: every
        adapter then goes to one placeholder cell, and the CLI synthesizes again with the record."""
        placeholder = DiscoveryRecord(PLACEHOLDER_NAME, f"{PLACEHOLDER_NAME}-base", PLACEHOLDER_NAME)
        self.record = ServiceRecord.one_cell(placeholder) if value is None else self._parse(value)
        self._cells: dict[str, ImportedMultiAdapterEndpoint] = {}

    @classmethod
    def from_service_parameter(cls, scope: Construct, id: str, *, parameter_name: str, **options: Any) -> ImportedAdapterService:
        """The service whose record `parameter_name` holds, read at synth (cached in ``cdk.context.json``)."""
        return cls(scope, id, parameter_name=parameter_name, **options)

    def cell_endpoint(self, cell: str) -> ImportedMultiAdapterEndpoint:
        """Cell `cell`'s endpoint, imported from its own record on first use."""
        if cell not in self._cells:
            index = list(self.record.cells).index(cell)
            if self.lookup_pending:
                self._cells[cell] = ImportedMultiAdapterEndpoint(
                    self, f"Cell{index}", record=self.record.cells[cell], lookup_pending=True
                )
            else:
                parameter = self.record.parameters.get(cell)
                if parameter is None and len(self.record.cells) == 1:  # a plain endpoint record: the one cell's own
                    self._cells[cell] = ImportedMultiAdapterEndpoint(
                        self,
                        f"Cell{index}",
                        record=self.record.cells[cell],
                        discovery_parameter_name=self.parameter_name,
                        tenant=self.tenant,
                        execution_role_arn=self._roles.get(cell),
                    )
                    return self._cells[cell]
                if parameter is None:
                    raise ConfigurationError(
                        [
                            Problem(
                                self._subject,
                                "parameter_name",
                                f"the service record names no endpoint record for {cell!r}; redeploy the service "
                                "with this cdk-adapters to publish it",
                            )
                        ]
                    )
                self._cells[cell] = ImportedMultiAdapterEndpoint.from_discovery_parameter(
                    self, f"Cell{index}", parameter_name=parameter, tenant=self.tenant, execution_role_arn=self._roles.get(cell)
                )
        return self._cells[cell]

    def cell_of(self, name: str) -> str:
        """The cell that serves (or will serve) adapter or alias `name`."""
        return self.record.cell_of(name)

    def add_adapter(self, name: str, *, artifact: AdapterArtifact, **options: Any) -> AdapterInferenceComponent:
        """Serve adapter `name` from this stack on the cell placement chooses; `options` are
        `ImportedMultiAdapterEndpoint.add_adapter`'s."""
        return self.cell_endpoint(self.cell_of(name)).add_adapter(name, artifact=artifact, **options)

    def grant_invoke(self, grantee: iam.IGrantable, adapters: Sequence[str]) -> iam.Grant:
        """Let `grantee` invoke `adapters` (adapters or aliases) on the cells that serve them, and only there."""
        raise_if_any(granted_list_problems(adapters, self._subject, leave_out="nothing: name the adapters"))
        if adapters is None:
            raise ConfigurationError([Problem(self._subject, "grant_invoke.adapters", "name the adapters to grant")])
        by_cell: dict[str, list[str]] = {}
        for name in adapters:
            by_cell.setdefault(self.cell_of(name), []).append(name)
        grants = [self.cell_endpoint(cell).grant_invoke(grantee, names) for cell, names in sorted(by_cell.items())]
        return reduce(lambda left, right: left.combine(right), grants)

    def _parse(self, value: str) -> ServiceRecord:
        try:
            return ServiceRecord.from_json(value)
        except DiscoveryRecordError as error:
            raise ConfigurationError(
                [
                    Problem(
                        self._subject,
                        "parameter_name",
                        f"{self.parameter_name!r} (cached in cdk.context.json) is not a service record this cdk-adapters reads: {error}",
                    )
                ],
                heading="cannot import AdapterService",
            ) from None
