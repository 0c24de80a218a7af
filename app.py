#!/usr/bin/env python3
"""Example app: one stack per environment, each serving the manifest's LoRA adapters from one endpoint.

    cdk synth                                  # the dev environment (default)
    cdk synth -c env=prod                      # another entry of "environments" in cdk.json
    cdk synth -c manifest=manifests/other.yaml # another adapter manifest
    cdk synth -c env=prod -c canary=true       # prod plus its canary stack (the environment's "canary")
    cdk synth -c cells=2                       # the environment as a service of two cells (endpoints)

What is served (base model, serving limits, adapters) comes from the adapter manifest
(`manifests/example.yaml` unless the environment or ``-c manifest=PATH`` names another); how it is
hosted (instance type and count, scaling, copies) comes from the environment's entry in cdk.json;
its optional "copy_scaling" autoscales the base component's copies (dev scales to zero, prod keeps
at least two copies with target tracking). The entry also says how the endpoint is watched and
upgraded: "request_metrics" (namespace, metric set, EMF on/off), "alarms" (endpoint thresholds,
adapter defaults, an optional "topic_arn") and "deployment" (the base component's rolling update,
rolling back on the endpoint's alarms).

Cells (``-c cells=N``, or the environment's "cells"): N stacks ``<stack_name>-cell-<i>``, each an
endpoint like the single stack's serving the manifest rows placed in it (a row's ``cell:`` pins its
family; the environment's "placement_file", when it exists, keeps recorded families where they
are; "cell_cap" bounds a cell; "bake_minutes" holds the later cells' upgrades until the first
cell's alarms stayed quiet that long), and ``<stack_name>-service`` holding the service record clients read.

The canary (``-c canary=true``): a second stack serving the manifest rows marked ``canary: true``
on a candidate image (``canary.image_uri``) or base model (``canary.manifest``, a manifest with the
candidate base), with the same alarms as the main endpoint. The main endpoint's discovery record
names it, so clients send it ``canary.traffic_percent`` of those adapters' calls.
Synth needs no AWS account: stacks are environment-agnostic unless the chosen environment names
an "account" and "region". cdk-nag's AwsSolutions, HIPAA Security and NIST 800-53 rev 5 packs run
on every synth; an unacknowledged finding fails it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_sns as sns
from cdk_nag import AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks
from constructs import Construct

from cdk_adapters import (
    AdapterService,
    BaseCopies,
    BatchSize,
    ComputeRequirements,
    ContainerImage,
    CopyPlacement,
    DeployCheck,
    FleetPlacement,
    InstancePool,
    Instances,
    Observability,
    PlacementRecord,
    RollingUpdate,
    Routing,
    VllmOptions,
)
from cdk_adapters.manifest import DEFAULT_MANIFEST_PATH, ManifestPlan, endpoint_from_manifest, plan_manifest_file
from cdk_adapters.manifest.service_wiring import service_from_manifest
from cdk_adapters.monitoring import AlarmThresholds, MonitoringAlarms, RequestMetrics
from cdk_adapters.problems import ConfigurationError, Problem

DEFAULT_ENVIRONMENT = "dev"
REQUIRED_KEYS = ("stack_name", "min_memory_required_in_mb")
"""Required of every environment, besides one of INSTANCE_KEYS."""
INSTANCE_KEYS = ("instance_type", "instance_pools")
"""One instance type, or instance pools (a list of types in priority order): exactly one."""
CANARY_HOSTING_KEYS = (
    "instance_type",
    "instance_pools",
    "instance_provisioning_timeout_seconds",
    "initial_instance_count",
    "min_instance_count",
    "max_instance_count",
    "copy_count",
    "copy_scaling",
    "min_memory_required_in_mb",
    "accelerator_devices",
    "image_uri",
    "vllm",
    "placement",
    "copy_placement",
    "data_cache",
    "routing",
    "observability",
)
"""What a canary may host differently from its environment (everything else, alarms included, is shared)."""
COPY_SCALING_KEYS = ("min_copies", "max_copies", "concurrent_requests_per_copy", "invocations_per_copy", "scale_to_zero")
"""cdk.json "copy_scaling": the copy range, one or both target-tracking targets, and scale to zero."""
HERE = Path(__file__).resolve().parent


class AdapterServingStack(cdk.Stack):
    """One environment's endpoint: hosting from cdk.json, base model and adapters from the manifest."""

    def __init__(self, scope: Construct, id: str, *, settings: Mapping[str, Any], plan: ManifestPlan, **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        self.canary: AdapterServingStack | None = None
        self.endpoint = endpoint_from_manifest(
            self, "Serving", manifest=plan, vllm=VllmOptions(**settings.get("vllm", {})), **endpoint_options(self, settings)
        )
        scaling = settings.get("copy_scaling")
        if scaling:
            apply_copy_scaling(self.endpoint, scaling)
        apply_tier_scaling(self.endpoint, plan, scaling)


def endpoint_options(scope: Construct, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The endpoint's hosting, monitoring and upgrade options from an environment's cdk.json entry
    (the alarm topic is imported into `scope`, the stack that uses it)."""
    image_uri = settings.get("image_uri")
    topic_arn = (settings.get("alarms") or {}).get("topic_arn")
    topic = sns.Topic.from_topic_arn(scope, "AlarmTopic", topic_arn) if topic_arn else None
    return {
        "image": ContainerImage.from_digest_uri(image_uri) if image_uri else ContainerImage.from_asset(),
        "compute": ComputeRequirements(
            min_memory_required_in_mb=settings["min_memory_required_in_mb"],
            accelerator_devices=settings.get("accelerator_devices", 1),
        ),
        "instances": instances(settings),
        "base_copies": base_copies(settings),
        "placement": FleetPlacement(**settings.get("placement", {})),
        "request_metrics": RequestMetrics(**_request_metrics_kwargs(settings.get("request_metrics", {}))),
        "alarms": monitoring_alarms(settings.get("alarms"), topic),
        "deployment": rolling_update(settings.get("deployment")),
        **hosting_options(settings),
    }


def build_service(
    app: cdk.App,
    settings: Mapping[str, Any],
    plan: ManifestPlan,
    cells: int,
    placement: PlacementRecord | None,
    **stack_props: Any,
) -> AdapterService:
    """The environment as a service of `cells` cells: stacks ``<stack_name>-cell-<i>``, each an
    endpoint like the single stack's, and ``<stack_name>-service`` with the service record."""
    service = service_from_manifest(
        app,
        settings["stack_name"],
        manifest=plan,
        cells=cells,
        vllm=VllmOptions(**settings.get("vllm", {})),
        props=lambda stack, _cell: endpoint_options(stack, settings),
        placement=placement,
        cell_cap=settings.get("cell_cap"),
        stack_props=stack_props,
        bake_time=cdk.Duration.minutes(settings["bake_minutes"]) if "bake_minutes" in settings else None,
        hashed_over=settings.get("hashed_over"),
    )
    scaling = settings.get("copy_scaling")
    for cell in service.cells:
        if scaling:
            apply_copy_scaling(cell.endpoint, scaling)
        apply_tier_scaling(cell.endpoint, plan, scaling)
    return service


def instances(settings: Mapping[str, Any]) -> Instances:
    """cdk.json's "instance_type", or "instance_pools" (instance type names, first tried first),
    "instance_provisioning_timeout_seconds" (checked by `instance_settings_problems`), the instance
    counts and "data_cache"."""
    pools = settings.get("instance_pools")
    timeout = settings.get("instance_provisioning_timeout_seconds")
    return Instances(
        instance_type=None if pools is not None else settings["instance_type"],
        pools=None if pools is None else [InstancePool(instance_type=name) for name in pools],
        provisioning_timeout=None if timeout is None else cdk.Duration.seconds(timeout),
        initial_count=settings.get("initial_instance_count", 1),
        min_count=settings.get("min_instance_count"),
        max_count=settings.get("max_instance_count"),
        data_cache=settings.get("data_cache"),
    )


def base_copies(settings: Mapping[str, Any]) -> BaseCopies:
    """cdk.json's "copy_count" and "copy_placement" (`CopyPlacement`'s fields)."""
    placement = settings.get("copy_placement")
    return BaseCopies(count=settings.get("copy_count", 1), placement=None if placement is None else CopyPlacement(**placement))


def instance_settings_problems(name: str, settings: Mapping[str, Any]) -> list[Problem]:
    """Exactly one of "instance_type" and "instance_pools", the pools as a list of type names."""
    field = f"context.environments.{name}"
    given = [key for key in INSTANCE_KEYS if key in settings]
    if len(given) != 1:
        state = "neither is set" if not given else "both are set"
        return [Problem("cdk.json", field, f"needs exactly one of instance_type and instance_pools; {state}")]
    pools = settings.get("instance_pools")
    if pools is not None and (not isinstance(pools, list) or not all(isinstance(pool, str) for pool in pools)):
        return [
            Problem(
                "cdk.json", f"{field}.instance_pools", f"must be a list of instance type names, first tried first; got {pools!r}"
            )
        ]
    timeout = settings.get("instance_provisioning_timeout_seconds")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int)):
        return [Problem("cdk.json", f"{field}.instance_provisioning_timeout_seconds", f"must be whole seconds, got {timeout!r}")]
    return []


def apply_copy_scaling(endpoint: Any, scaling: Mapping[str, Any], base: Any = None) -> None:
    """Autoscale the endpoint's base component (or `base`, a rank tier's) as cdk.json's
    "copy_scaling" says (checked by `copy_scaling_problems`; the construct checks the values and
    the instance capacity)."""
    base = base if base is not None else endpoint.base_component
    copies = base.auto_scale_copy_count(min_copies=scaling["min_copies"], max_copies=scaling["max_copies"])
    if "concurrent_requests_per_copy" in scaling:
        copies.scale_on_concurrent_requests(scaling["concurrent_requests_per_copy"])
    if "invocations_per_copy" in scaling:
        copies.scale_on_invocations(scaling["invocations_per_copy"])
    if scaling.get("scale_to_zero"):
        copies.scale_to_zero()


def apply_tier_scaling(endpoint: Any, plan: ManifestPlan, scaling: Mapping[str, Any] | None) -> None:
    """Autoscale each rank tier whose manifest entry gives min_copies/max_copies, on the
    environment's "copy_scaling" targets (the range is the tier's own)."""
    ranges = plan.tier_scaling()
    if ranges and not scaling:
        problem = Problem(
            "cdk.json",
            "copy_scaling",
            "the manifest autoscales rank tiers (min_copies/max_copies): set the environment's copy_scaling, "
            "whose targets they scale on",
        )
        raise ConfigurationError([problem], heading="cannot autoscale the rank tiers")
    for tier in endpoint.rank_tiers:
        if tier.max_lora_rank in ranges:
            low, high = ranges[tier.max_lora_rank]
            apply_copy_scaling(endpoint, {**(scaling or {}), "min_copies": low, "max_copies": high}, tier.base_component)


def copy_scaling_problems(name: str, scaling: object) -> list[Problem]:
    """The shape of an environment's "copy_scaling" entry (the values are the construct's to check)."""
    field = f"context.environments.{name}.copy_scaling"
    if not isinstance(scaling, Mapping):
        return [Problem("cdk.json", field, f"must be an object with {', '.join(COPY_SCALING_KEYS)}, got {scaling!r}")]
    found = [
        Problem("cdk.json", f"{field}.{key}", "is not a copy_scaling setting") for key in scaling if key not in COPY_SCALING_KEYS
    ]
    found += [Problem("cdk.json", f"{field}.{key}", "is required") for key in ("min_copies", "max_copies") if key not in scaling]
    if "concurrent_requests_per_copy" not in scaling and "invocations_per_copy" not in scaling:
        found.append(Problem("cdk.json", field, "needs concurrent_requests_per_copy or invocations_per_copy (a target to track)"))
    return found


HOSTING_BLOCKS = {
    "routing": Routing,
    "observability": Observability,
    "copy_placement": CopyPlacement,
    "deploy_check": DeployCheck,
}
"""cdk.json blocks that are one typed option each (field names as keyword arguments)."""


def hosting_options(settings: Mapping[str, Any]) -> dict[str, Any]:
    """cdk.json's "routing", "observability" and "deploy_check"; absent: the construct's defaults.
    ("reasons" beside them says why an environment sets them; not read.) "copy_placement" is
    checked with them and goes into `base_copies`."""
    return {key: kind(**settings[key]) for key, kind in HOSTING_BLOCKS.items() if key in settings and key != "copy_placement"}


def hosting_settings_problems(name: str, settings: Mapping[str, Any]) -> list[Problem]:
    """Malformed hosting blocks, named by their cdk.json path (values are the construct's to check)."""
    found = []
    for key, kind in HOSTING_BLOCKS.items():
        if key not in settings:
            continue
        field = f"context.environments.{name}.{key}"
        if not isinstance(settings[key], dict):
            found.append(Problem("cdk.json", field, f"must be an object, got {settings[key]!r}"))
            continue
        try:
            kind(**settings[key])
        except TypeError as error:
            found.append(Problem("cdk.json", field, str(error)))
    return found


def _request_metrics_kwargs(block: Mapping[str, Any]) -> dict[str, Any]:
    kwargs = dict(block)
    if isinstance(kwargs.get("metrics"), list):
        kwargs["metrics"] = tuple(kwargs["metrics"])
    return kwargs


def _thresholds(block: Mapping[str, Any] | None) -> AlarmThresholds:
    values = dict(block or {})
    if "period_minutes" in values:
        values["period"] = cdk.Duration.minutes(values.pop("period_minutes"))
    return AlarmThresholds(**values)


def monitoring_alarms(block: Mapping[str, Any] | None, topic: sns.ITopic | None) -> MonitoringAlarms | None:
    """cdk.json's "alarms": {"endpoint": {...}, "adapters": {...}, "topic_arn": ARN, "runbook_url": URL};
    absent: no alarms (unless manifest rows opt in, which gives the defaults)."""
    if block is None:
        return None
    return MonitoringAlarms(
        endpoint=_thresholds(block.get("endpoint")),
        adapters=_thresholds(block.get("adapters")),
        topic=topic,
        runbook_url=block.get("runbook_url"),
    )


def rolling_update(block: Mapping[str, Any] | None) -> RollingUpdate | None:
    """cdk.json's "deployment", in seconds and copies; absent: SageMaker's default update."""
    if block is None:
        return None
    values = dict(block)
    kwargs: dict[str, Any] = {}
    for key in ("maximum_batch_size", "rollback_maximum_batch_size"):
        if key in values:
            kwargs[key] = BatchSize(**values.pop(key))
    if "wait_interval_seconds" in values:
        kwargs["wait_interval"] = cdk.Duration.seconds(values.pop("wait_interval_seconds"))
    if "maximum_execution_timeout_seconds" in values:
        kwargs["maximum_execution_timeout"] = cdk.Duration.seconds(values.pop("maximum_execution_timeout_seconds"))
    if "rollback_on_endpoint_alarms" in values:
        kwargs["rollback_on_endpoint_alarms"] = tuple(values.pop("rollback_on_endpoint_alarms"))
    if values:
        raise TypeError(f"unknown keys {', '.join(sorted(values))}")
    return RollingUpdate(**kwargs)


def monitoring_settings_problems(name: str, settings: Mapping[str, Any]) -> list[Problem]:
    """Malformed "request_metrics", "alarms" and "deployment" blocks, named by their cdk.json path
    (the typed options then report bad values with their own messages)."""
    found = []
    checks = (
        ("request_metrics", lambda block: RequestMetrics(**_request_metrics_kwargs(block))),
        ("alarms", lambda block: monitoring_alarms({k: v for k, v in block.items() if k != "topic_arn"}, None)),
        ("deployment", rolling_update),
    )
    for key, build_block in checks:
        if key not in settings:
            continue
        block = settings[key]
        if not isinstance(block, dict):
            found.append(Problem("cdk.json", f"context.environments.{name}.{key}", f"must be an object, got {block!r}"))
            continue
        try:
            build_block(block)
        except TypeError as error:
            found.append(Problem("cdk.json", f"context.environments.{name}.{key}", str(error)))
    return found


def canary_settings(name: str, settings: Mapping[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    """The canary stack's settings: the environment's (alarms and metrics included), with the
    canary block's hosting overrides; no rolling update (the canary is where upgrades are tried)."""
    block = settings.get("canary")
    field = f"context.environments.{name}.canary"
    if not isinstance(block, dict):
        return {}, [Problem("cdk.json", field, "is required for -c canary=true: {stack_name, traffic_percent, ...}")]
    problems = [
        Problem("cdk.json", f"{field}.{key}", "is required") for key in ("stack_name", "traffic_percent") if key not in block
    ]
    allowed = set(CANARY_HOSTING_KEYS) | {"stack_name", "traffic_percent", "manifest"}
    problems += [
        Problem("cdk.json", f"{field}.{key}", f"is not a canary setting; known: {', '.join(sorted(allowed))}")
        for key in block
        if key not in allowed
    ]
    merged = {key: value for key, value in settings.items() if key not in ("canary", "deployment", "termination_protection")}
    if any(key in block for key in INSTANCE_KEYS):  # the canary's own instances replace the environment's
        for key in INSTANCE_KEYS:
            merged.pop(key, None)
    merged.update(block)
    return merged, problems


def environment_settings(app: cdk.App) -> tuple[str, dict[str, Any], list[Problem]]:
    """The chosen environment's name and settings, and every problem with them."""
    name = app.node.try_get_context("env") or DEFAULT_ENVIRONMENT
    environments = app.node.try_get_context("environments") or {}
    if name not in environments:
        known = ", ".join(sorted(environments)) or "none"
        return name, {}, [Problem("cdk.json", f"context.environments.{name}", f"is not defined (defined: {known})")]
    settings = dict(environments[name])
    missing = [
        Problem("cdk.json", f"context.environments.{name}.{key}", "is required") for key in REQUIRED_KEYS if key not in settings
    ]
    missing += instance_settings_problems(name, settings)
    if settings.get("copy_scaling") not in (None, False):
        missing += copy_scaling_problems(name, settings["copy_scaling"])
    return name, settings, missing


def manifest_path(app: cdk.App, settings: Mapping[str, Any]) -> Path:
    """``-c manifest=PATH`` first, then the environment's "manifest", then the default."""
    chosen = Path(app.node.try_get_context("manifest") or settings.get("manifest") or DEFAULT_MANIFEST_PATH)
    return chosen if chosen.is_absolute() else HERE / chosen


def service_settings(app: cdk.App, name: str, settings: Mapping[str, Any]) -> tuple[int, PlacementRecord | None, list[Problem]]:
    """``-c cells=N`` (else the environment's "cells", else 1) and the placement file: ``-c
    placement=PATH``, which must exist, else the environment's "placement_file", read when it exists."""
    from_context = app.node.try_get_context("cells")
    given = from_context if from_context is not None else settings.get("cells", 1)
    where = ("-c", "cells") if from_context is not None else ("cdk.json", f"context.environments.{name}.cells")
    cells = given if isinstance(given, int) and not isinstance(given, bool) else None
    if isinstance(given, str) and given.strip().isdigit():
        cells = int(given)
    if cells is None or cells < 1:
        return 1, None, [Problem(*where, f"must be a whole number of cells >= 1, got {given!r}")]
    chosen_by_context = app.node.try_get_context("placement")
    chosen = chosen_by_context or settings.get("placement_file")
    path = None if chosen is None else (Path(chosen) if Path(chosen).is_absolute() else HERE / chosen)
    if path is None or (not path.is_file() and not chosen_by_context):
        return cells, None, []  # no file yet: `cdk-adapters place` writes it
    field = "placement" if chosen_by_context else f"context.environments.{name}.placement_file"
    try:
        return cells, PlacementRecord.from_json(path.read_text(encoding="utf-8"), str(path)), []
    except (OSError, ValueError) as error:
        return cells, None, [Problem("-c" if chosen_by_context else "cdk.json", field, str(error))]


def build(app: cdk.App) -> AdapterServingStack | AdapterService:
    """Add the chosen environment's stack (or, with cells, its service) and the nag packs to `app`,
    or raise every problem found."""
    name, settings, problems = environment_settings(app)
    problems += monitoring_settings_problems(name, settings)
    problems += hosting_settings_problems(name, settings)
    cells, placement, cell_problems = service_settings(app, name, settings)
    problems += cell_problems
    with_canary = str(app.node.try_get_context("canary") or "false").lower() == "true"
    if with_canary and cells > 1:
        problems.append(
            Problem(
                "cdk.json",
                f"context.environments.{name}",
                "-c canary=true serves a canary beside one endpoint; a service of cells is upgraded cell by cell instead",
            )
        )
        with_canary = False
    canary: dict[str, Any] | None = None
    canary_plan = None
    if with_canary:
        canary, canary_problems = canary_settings(name, settings)
        if not canary_problems:
            canary_problems = instance_settings_problems(f"{name}.canary", canary)
        problems += canary_problems
        if canary_problems:
            canary = None
    plan = None
    try:
        # The gate judges the engine these settings start (tower/connector LoRA as "vllm" sets it).
        tower_connector_lora = (settings.get("vllm") or {}).get("enable_tower_connector_lora")
        plan = plan_manifest_file(manifest_path(app, settings), tower_connector_lora=tower_connector_lora)
        if canary is not None:
            candidate = (
                plan_manifest_file(manifest_path(app, canary), tower_connector_lora=tower_connector_lora)
                if "manifest" in (settings.get("canary") or {})
                else plan
            )
            canary_plan = candidate.canary_plan()
    except ConfigurationError as error:
        problems += error.problems
    if problems or plan is None:
        raise ConfigurationError(problems, heading=f"cannot synthesize environment '{name}'")
    account, region = settings.get("account"), settings.get("region")
    environment = cdk.Environment(account=account, region=region) if account or region else None
    if cells > 1:
        service = build_service(
            app,
            settings,
            plan,
            cells,
            placement,
            env=environment,
            description=f"cdk-adapters: multi-adapter LoRA service ({name})",
            termination_protection=bool(settings.get("termination_protection", False)),
        )
        cdk.Tags.of(service).add("cdk-adapters:environment", name)
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), HIPAASecurityChecks(app), NIST80053R5Checks(app))
        return service
    stack = AdapterServingStack(
        app,
        settings["stack_name"],
        settings=settings,
        plan=plan,
        env=environment,
        description=f"cdk-adapters: multi-adapter LoRA endpoint ({name})",
        termination_protection=bool(settings.get("termination_protection", False)),
    )
    cdk.Tags.of(stack).add("cdk-adapters:environment", name)
    if canary is not None and canary_plan is not None:
        stack.canary = AdapterServingStack(
            app,
            canary["stack_name"],
            settings=canary,
            plan=canary_plan,
            env=environment,
            description=f"cdk-adapters: canary of the multi-adapter LoRA endpoint ({name})",
        )
        cdk.Tags.of(stack.canary).add("cdk-adapters:environment", f"{name}-canary")
        stack.endpoint.set_canary(stack.canary.endpoint, traffic_percent=canary["traffic_percent"])
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), HIPAASecurityChecks(app), NIST80053R5Checks(app))
    return stack


def main() -> int:
    app = cdk.App()
    try:
        build(app)
    except ConfigurationError as error:
        # Every problem, one per line, and no traceback: the message is the whole story.
        print(error, file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
