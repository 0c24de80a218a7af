"""An endpoint deployed by another stack or CDK app, seen from a tenant's stack.

A platform team owns the endpoint and its base model; tenant teams ship adapters on their own
schedule, from their own stacks or apps. `ImportedMultiAdapterEndpoint` is the platform's endpoint
as a tenant sees it: it knows names, not constructs (no cross-stack export, no construct shared
with the platform's app), so it can grant invoke, read metrics and add adapter components.

Where a tenant's components live: directly in the tenant's stack, not in nested shards. Shards
keep one endpoint's thousand-adapter fleet under CloudFormation's 500 resources per stack; a
tenant stack holds one team's adapters, and a team with more adds another stack. The stack is
checked at synth against the same budget as an endpoint whose components stay in its own stack.

What is checked, as `MultiAdapterEndpoint.add_adapter` checks it: the adapter name and the
``<prefix>-<adapter>`` naming rule, the version-suffix rule (among this import's adapters), the
adapter locations (a published archive must lie in one, since the platform's role reads by
location) and, for a local archive, the compatibility gate against the platform's serving
reference (`contract.discovery.ServingReference`), so a tenant's bad adapter fails the tenant's
synth with the rule id the platform's own synth would give.

Tenants: when the platform assigns adapter locations to tenants (``AdapterLocation(...,
tenant="acme")``, published in the record's serving reference), an import must say which tenant
it is (``tenant="acme"``), and a published adapter must lie under that tenant's own prefix: the
most specific assigned location holding it must be the tenant's (rule ``tenant-location``). A
platform that assigns no tenant keeps the single-team rule (any declared location), and an import
that names a tenant it assigns none is refused rather than left unchecked. The check runs at the
tenant's synth; the platform's role still reads every location (see `adapter_location`).

Grants: `grant_invoke` grants this import's own adapters by default; a name must be one of them
or a platform alias; every component (``<prefix>-*``: every tenant's and the base) only with
``all_components=True`` (`invoke_grant.TenantInvokeGrants`).

Deploy check: `add_deploy_check` gives the tenant's stack its own check (`deploy_check`), which
invokes the tenant's new or changed adapters after the tenant's deployment and fails it (rolling it
back) when one does not answer as itself. Its policy names the endpoint and each of this stack's
components, never the ``<prefix>-*`` pattern: the platform's and other tenants' adapters share the
prefix, and a tenant knows only its own component names.

Deletion order: CloudFormation orders deletions within a stack, and between stacks only through
exports it knows are imported. A tenant's components name the endpoint and base component by
literal names, so CloudFormation cannot stop the platform's stack from being deleted first; delete
tenant stacks (or their adapters) before the platform's endpoint (docs/constructs.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Stack, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.contract import adapter_names
from cdk_adapters.contract.discovery import (
    DiscoveryRecord,
    ServingReference,
)
from cdk_adapters.deploy_check.deploy_check import AdapterDeployCheck
from cdk_adapters.deploy_check.settings import AdapterCheck, DeployCheck
from cdk_adapters.endpoint import adapter_checks, names, serving_reference
from cdk_adapters.endpoint.components import AdapterInferenceComponent, InferenceComponentMetrics
from cdk_adapters.endpoint.discovery_parameter import lookup_discovery_record
from cdk_adapters.endpoint.invoke_grant import TenantInvokeGrants, granted_list_problems
from cdk_adapters.endpoint.tenant_archives import TenantArchiveGrant
from cdk_adapters.endpoint.tenant_assignment import TenantStackBudget, assigned_tenant, tenant_location_problems
from cdk_adapters.gate import Acknowledgment, Reference
from cdk_adapters.hosting.logs import EndpointLogs, grant_read_capture
from cdk_adapters.private.arns import endpoint_arn
from cdk_adapters.problems import ConfigurationError, Problem, raise_if_any, wrong_kind


class _Component(InferenceComponentMetrics):
    """The ``metric_*`` methods of a component known by name only."""

    def __init__(self, inference_component_name: str) -> None:
        self.inference_component_name = inference_component_name


class ImportedMultiAdapterEndpoint(Construct):
    """A `MultiAdapterEndpoint` deployed elsewhere; adapters added here live in this stack.

    Build one with `MultiAdapterEndpoint.from_endpoint_attributes` (plain attributes, no
    account needed) or `MultiAdapterEndpoint.from_discovery_parameter` (the platform's discovery
    record, read at synth and cached in ``cdk.context.json``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        record: DiscoveryRecord,
        discovery_parameter_name: str | None = None,
        adapter_locations: Sequence[AdapterLocation] = (),
        execution_role_arn: str | None = None,
        lookup_pending: bool = False,
        tenant: str | None = None,
    ) -> None:
        """
        :param record: what the platform published (or the attributes, as a record).
        :param discovery_parameter_name: the record's SSM parameter, for `grant_read_discovery`.
        :param adapter_locations: where the platform's role reads published adapters, beside
            those the serving reference lists. Not allowed with `tenant` on a platform that
            assigns tenants (only the platform assigns a tenant's locations).
        :param execution_role_arn: the platform endpoint's execution role, needed only for local
            archives: this stack grants it read access to their asset objects.
        :param lookup_pending: the record is a placeholder (first synth pass of a lookup).
        :param tenant: which of the platform's tenants this stack is. Required when the record's
            serving reference assigns locations to tenants (published adapters must then lie under
            this tenant's own prefix); refused when it assigns none. Default None: the platform
            assigns no tenant (single team), or the serving reference is not known here.
        """
        super().__init__(scope, id)
        self._subject = f"imported MultiAdapterEndpoint {self.node.path!r}"
        problems = _attribute_problems(record, discovery_parameter_name, self._subject)
        assigned, tenant_problems = assigned_tenant(record.serving, tenant, bool(adapter_locations), self._subject)
        problems += tenant_problems
        locations = list(adapter_locations or ())
        if record.serving is not None:
            locations += serving_reference.adapter_locations(record.serving, assigned)
        for index, location in enumerate(locations):
            problems += location.problems(self._subject, f"adapter_locations[{index}]")
        problems += _role_arn_problems(execution_role_arn, self._subject)
        raise_if_any(problems, heading=f"cannot import MultiAdapterEndpoint {self.node.path!r}")
        self.record = record
        """The platform's discovery record (aliases and canary included), or the attributes as one."""
        self.endpoint_name = record.endpoint_name
        self.base_component_name = record.base_inference_component_name
        self.discovery_parameter_name = discovery_parameter_name
        self.adapter_locations = locations
        """Where this import's published adapters may lie: with a tenant assignment, the tenant's own."""
        self.tenant = assigned if assigned is not None else tenant
        """The tenant this stack is (as the platform spells it), or None."""
        self._tenant_assigned = assigned is not None
        self.lookup_pending = lookup_pending
        """True on the first synth pass of `from_discovery_parameter`, before the context holds the
        record: names are placeholders and the gate runs without the platform's reference."""
        self.endpoint_arn = endpoint_arn(self, self.endpoint_name)
        self._execution_role_arn = execution_role_arn
        self._archive_grant = TenantArchiveGrant(self, execution_role_arn) if execution_role_arn is not None else None
        self._components: dict[str, AdapterInferenceComponent] = {}
        self.deploy_check: AdapterDeployCheck | None = None
        """This stack's deploy check (`add_deploy_check`), or None."""
        self.node.add_validation(TenantStackBudget(self))
        self._invoke_grants = TenantInvokeGrants(self)
        self.node.add_validation(self._invoke_grants)

    # ------------------------------------------------------------------ factories

    @classmethod
    def from_endpoint_attributes(
        cls,
        scope: Construct,
        id: str,
        *,
        endpoint_name: str,
        base_component_name: str,
        component_prefix: str,
        discovery_parameter_name: str | None = None,
        serving_reference: ServingReference | None = None,
        adapter_locations: Sequence[AdapterLocation] = (),
        execution_role_arn: str | None = None,
        tenant: str | None = None,
    ) -> ImportedMultiAdapterEndpoint:
        """An endpoint from plain attributes (the platform stack's outputs); needs no account.

        :param serving_reference: what adapters must fit (``DiscoveryRecord.from_json(text).serving``
            of the platform's record), tenant assignments included. Default None: the gate runs
            only its file-level rules here and the rest runs in the container when SageMaker
            registers the adapter; no tenant assignment is known, so none is checked.
        :param tenant: which tenant this stack is (see the constructor).
        """
        record = DiscoveryRecord(
            endpoint_name=endpoint_name,
            base_inference_component_name=base_component_name,
            component_prefix=component_prefix,
            serving=serving_reference,
        )
        return cls(
            scope,
            id,
            record=record,
            discovery_parameter_name=discovery_parameter_name,
            adapter_locations=adapter_locations,
            execution_role_arn=execution_role_arn,
            tenant=tenant,
        )

    @classmethod
    def from_discovery_parameter(
        cls,
        scope: Construct,
        id: str,
        *,
        parameter_name: str,
        adapter_locations: Sequence[AdapterLocation] = (),
        execution_role_arn: str | None = None,
        tenant: str | None = None,
    ) -> ImportedMultiAdapterEndpoint:
        """An endpoint read from its discovery record at synth (`ssm.StringParameter.value_from_lookup`,
        cached in ``cdk.context.json``; ``cdk context --reset`` reads it again). The stack needs an
        explicit account and region. `tenant`: which of the platform's tenants this stack is
        (required when the record assigns tenants locations; see the constructor).

        On the first pass, before the context holds the value, CDK returns a dummy value: the
        import then stands for a placeholder endpoint (`lookup_pending`), so synth completes and
        the CLI can look the parameter up and synthesize again with the record.
        """
        record, pending = lookup_discovery_record(scope, f"imported MultiAdapterEndpoint {scope.node.path}/{id}", parameter_name)
        return cls(
            scope,
            id,
            record=record,
            discovery_parameter_name=parameter_name,
            adapter_locations=adapter_locations,
            execution_role_arn=execution_role_arn,
            lookup_pending=pending,
            tenant=tenant,
        )

    # ------------------------------------------------------------------ the interface

    @property
    def component_prefix(self) -> str:
        return self.record.component_prefix

    @property
    def serving_reference(self) -> ServingReference | None:
        """What the platform published that adapters must fit; None when not known here."""
        return self.record.serving

    @property
    def compatibility_reference(self) -> Reference:
        """What local archives are checked against (file-level rules only when no reference is known)."""
        if self.record.serving is None:
            return Reference(None)
        return serving_reference.gate_reference(self.record.serving)

    @property
    def adapters(self) -> dict[str, AdapterInferenceComponent]:
        """Adapters added through this import (not the platform's), in the order added."""
        return {component.adapter_name: component for component in self._components.values()}

    def adapter_component_name(self, adapter_name: str) -> str:
        """The component that serves `adapter_name`, whoever added it: the naming rule."""
        return self.record.component_name(adapter_name)

    def add_adapter(
        self,
        name: str,
        *,
        artifact: AdapterArtifact,
        acknowledge: Acknowledgment | None = None,
        check: AdapterCheck | None = None,
        rank: int | None = None,
    ) -> AdapterInferenceComponent:
        """Serve one adapter from this stack as ``<prefix>-<name>`` on the imported endpoint.

        With rank tiers in the platform's record, `rank` (the adapter's LoRA rank; a local
        archive's own is read) attaches it to the smallest tier holding it, by the platform's rule.

        Checked as the platform's `add_adapter` checks it (name, version suffix, location, and the
        gate on a local archive against the platform's serving reference). A local archive needs
        `execution_role_arn`: this stack grants the platform's role its asset object. `check` is
        this adapter's own deploy-check request and expected answer (needs `add_deploy_check`
        first; default: the check's request, any answer of its own).
        """
        subject = f"adapter {name!r} of {self._subject}"
        problems = adapter_checks.name_and_artifact_problems(
            name,
            artifact,
            acknowledge,
            known=self.adapters,
            is_added=lambda added: adapter_names.adapter_name_key(added) in self._components,
            subject=subject,
        )
        problems += adapter_checks.check_request_problems(
            check,
            has_deploy_check=self.deploy_check is not None,
            subject=subject,
            how_to_add="needs this stack's deploy check: call add_deploy_check(DeployCheck(...)) before adding adapters",
        )
        serving = self.record.serving if not self.lookup_pending else None
        tiers = (serving.tiers or ((serving.max_lora_rank, self.base_component_name),)) if serving is not None else ()
        held = None
        if tiers:
            held, rank_problems = adapter_checks.attach_tier(name, artifact, rank, None, [tier for tier, _ in tiers], subject)
            problems += rank_problems
        if not problems:
            problems += adapter_checks.gate_problems(
                name, artifact, self.compatibility_reference, self._location_problems, subject
            )
        raise_if_any(problems, heading=f"cannot add adapter {name!r} to {self._subject}")
        base = next((b for tier, b in tiers if tier == held), self.base_component_name)
        component = AdapterInferenceComponent(
            self,
            name,
            adapter_name=name,
            inference_component_name=self.adapter_component_name(name),
            endpoint_name=self.endpoint_name,
            base_component_name=base,
            artifact=artifact,
        )
        config = component.artifact_config
        if config.asset_object_arn is not None:
            assert self._archive_grant is not None, "a local archive is refused without execution_role_arn"
            policy = self._archive_grant.add(config.asset_object_arn, config.asset_kms_key_arn)
            component.resource.add_resource_dependency(policy.node.default_child)  # type: ignore[arg-type]  # its CfnPolicy
        self._components[adapter_names.adapter_name_key(name)] = component
        if self.deploy_check is not None:
            self.deploy_check.track(component, check)
        return component

    def add_deploy_check(
        self,
        settings: DeployCheck | None = None,
        *,
        logs: EndpointLogs | None = None,
        vpc: ec2.IVpc | None = None,
        vpc_subnets: ec2.SubnetSelection | None = None,
    ) -> AdapterDeployCheck:
        """Prove after each deployment of this stack that its new or changed adapters answer as themselves.

        The same check as ``MultiAdapterEndpoint(deploy_check=...)`` (docs/deploy-check.md), in this
        stack: it runs after this stack's components, invokes only those that are new or changed,
        and fails this stack's deployment (rolling it back) when one errors, times out or is
        answered by anything else. Its policy allows invoking the endpoint and this stack's
        components by name, nothing of the platform's or another tenant's. Adapters added before
        and after are all checked. Call it once.

        :param settings: the request, timeouts and retries. Default `DeployCheck()`.
        :param logs: retention, key and removal policy of the check's two log groups. Default `EndpointLogs()`.
        :param vpc: run the check function in this VPC (it needs HTTPS to the SageMaker runtime: an
            interface endpoint ``runtime.sagemaker`` or a NAT). Default: outside any VPC.
        :param vpc_subnets: the subnets in `vpc`. Default: the VPC's private subnets.
        """
        settings = settings if settings is not None else DeployCheck()
        logs = logs if logs is not None else EndpointLogs()
        problems: list[Problem] = []
        if self.deploy_check is not None:
            problems.append(Problem(self._subject, "add_deploy_check", "is already called; a stack has one deploy check"))
        for field, value, kind in (("deploy_check", settings, DeployCheck), ("logs", logs, EndpointLogs)):
            wrong = wrong_kind(self._subject, field, value, kind)
            problems += wrong or value.problems(self._subject)
        if vpc_subnets is not None and vpc is None:
            problems.append(Problem(self._subject, "vpc_subnets", "needs vpc"))
        raise_if_any(problems, heading=f"cannot add a deploy check to {self._subject}")
        self.deploy_check = AdapterDeployCheck(
            self,
            "DeployCheck",
            settings=settings,
            endpoint_name=self.endpoint_name,
            endpoint_arn=self.endpoint_arn,
            component_prefix=self.component_prefix,
            base_component_name=self.base_component_name,
            log_settings=logs,
            vpc=vpc,
            vpc_subnets=vpc_subnets,
            named_components_only=True,
        )
        for component in self._components.values():
            self.deploy_check.track(component, None)
        return self.deploy_check

    def grant_invoke(
        self, grantee: iam.IGrantable, adapters: Sequence[str] | None = None, *, all_components: bool = False
    ) -> iam.Grant:
        """Let `grantee` invoke this stack's adapters on the imported endpoint.

        Default: this import's own adapters (those added through `add_adapter`, before or after
        this call: the resources are rendered at synth). `adapters` names some of them, or the
        platform's aliases from the record (an alias grants its targets); any other name (another
        tenant's adapter, a platform adapter with no alias) fails synth. `all_components=True`
        grants every component of the endpoint (``<prefix>-*``: every tenant's, the platform's
        and the base), and must be asked for. Canary components of the granted adapters, and the
        canary's ``<prefix>-*`` with `all_components`, are included when the record names a canary.
        """
        if not isinstance(all_components, bool):
            raise ConfigurationError(
                [Problem(self._subject, "grant_invoke.all_components", f"must be True or False, got {all_components!r}")]
            )
        if all_components and adapters is not None:
            raise ConfigurationError(
                [
                    Problem(
                        self._subject,
                        "grant_invoke.all_components",
                        "is given with adapters=; grant named adapters, or every component, not both",
                    )
                ]
            )
        raise_if_any(granted_list_problems(adapters, self._subject, leave_out="this stack's adapters"))
        problems = [
            problem
            for name in adapters or ()
            for problem in names.validate_adapter_name(name, f"grant_invoke.adapters {name!r} of {self._subject}")
        ]
        raise_if_any(problems, heading=f"cannot grant invoke on {self._subject}")
        return self._invoke_grants.add(grantee, None if adapters is None else list(adapters), all_components)

    def grant_read_discovery(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` read the discovery parameter (by its literal ARN)."""
        if self.discovery_parameter_name is None:
            raise ConfigurationError(
                [Problem(self._subject, "discovery_parameter_name", "is not known; import with discovery_parameter_name=...")]
            )
        arn = Stack.of(self).format_arn(
            service="ssm", resource="parameter", resource_name=self.discovery_parameter_name.lstrip("/")
        )
        return iam.Grant.add_to_principal(grantee=grantee, actions=["ssm:GetParameter"], resource_arns=[arn])

    def grant_read_capture(self, grantee: iam.IGrantable, adapters: Sequence[str]) -> iam.Grant:
        """Let `grantee` read the captured requests of this stack's own `adapters` (their streams
        of the endpoint's capture log group, ``logs:GetLogEvents`` only); another tenant's adapter
        is refused. See `MultiAdapterEndpoint.grant_read_capture`."""
        own = {adapter_names.adapter_name_key(name) for name in self.adapters}
        return grant_read_capture(
            self,
            grantee,
            endpoint_name=self.endpoint_name,
            adapters=adapters,
            is_own=lambda name: adapter_names.adapter_name_key(name) in own,
            subject=self._subject,
            not_own="is not an adapter this stack added",
        )

    def metric(self, metric_name: str, *, adapter: str | None = None, **props: Any) -> cloudwatch.Metric:
        """An ``AWS/SageMaker`` metric of one adapter's component (any adapter of the endpoint,
        by the naming rule), or of the base component."""
        return self.component_metrics(adapter).metric(metric_name, **props)

    def component_metrics(self, adapter: str | None = None) -> InferenceComponentMetrics:
        """The ``metric_*`` methods (``metric_invocations()``, ...) of one component by name."""
        if adapter is None:
            return _Component(self.base_component_name)
        raise_if_any(
            names.validate_adapter_name(adapter, f"metric adapter {adapter!r} of {self._subject}"),
            heading="cannot name the metric",
        )
        return _Component(self.adapter_component_name(adapter))

    # ------------------------------------------------------------------ internals

    def _location_problems(self, artifact: AdapterArtifact, subject: str) -> list[Problem]:
        published = artifact.s3_object
        if published is None:
            if self._execution_role_arn is None:
                return [
                    Problem(
                        subject,
                        "artifact",
                        "is a local archive, which the platform's endpoint role can read only when this stack grants it: "
                        "import with execution_role_arn=..., or publish the archive under one of the endpoint's adapter locations",
                    )
                ]
            return []
        if self.lookup_pending:  # no record yet: the pass with the record checks the location
            return []
        if self._tenant_assigned:
            return tenant_location_problems(self.record.serving, self.tenant, published, subject)
        if adapter_checks.containing_location(published, self.adapter_locations) is not None:
            return []
        remedy = "the platform's role reads adapters only there: publish it under one of them, or ask the platform to declare its prefix"
        return [adapter_checks.outside_locations(published, self.adapter_locations, subject, whose="the endpoint", remedy=remedy)]


def _attribute_problems(record: DiscoveryRecord, discovery_parameter_name: object, subject: str) -> list[Problem]:
    """The record's names follow SageMaker's rules; the parameter is an SSM name."""
    problems: list[Problem] = []
    for field, value in (
        ("endpoint_name", record.endpoint_name),
        ("base_component_name", record.base_inference_component_name),
        ("component_prefix", record.component_prefix),
    ):
        problems += [Problem(p.subject, field, p.message) for p in adapter_names.validate_component_name(value, subject)]
    if discovery_parameter_name is not None and (
        not isinstance(discovery_parameter_name, str) or not discovery_parameter_name.startswith("/")
    ):
        problems.append(
            Problem(
                subject,
                "discovery_parameter_name",
                f"must be an SSM parameter name starting with '/', got {discovery_parameter_name!r}",
            )
        )
    return problems


def _role_arn_problems(execution_role_arn: object, subject: str) -> list[Problem]:
    if execution_role_arn is not None and (
        not isinstance(execution_role_arn, str)
        or not (Token.is_unresolved(execution_role_arn) or execution_role_arn.startswith("arn:"))
    ):
        return [Problem(subject, "execution_role_arn", f"must be an IAM role ARN, got {execution_role_arn!r}")]
    return []
