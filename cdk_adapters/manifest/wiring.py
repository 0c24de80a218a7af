"""Putting a checked manifest into a `MultiAdapterEndpoint`: base model, serving limits, adapters.

Only a `ManifestPlan` (a manifest that passed the gate) can be wired, so every problem has been
reported before the first construct is created. Local adapter directories are packaged
deterministically into content-addressed archives and shipped as CDK assets; ``s3://`` sources
are referenced as published, read through the manifest's ``adapter_locations``.

The manifest knows the endpoint, never the other way round: `endpoint_from_manifest` lives here
and `cdk_adapters.endpoint.endpoint` imports nothing of the manifest.
"""

from __future__ import annotations

import tempfile
from os import PathLike
from pathlib import Path
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.artifacts.packaging import package_adapter
from cdk_adapters.contract.capture_record import CaptureSettings
from cdk_adapters.contract.s3_url import parse_s3_url
from cdk_adapters.contract.tenant_limits import AdapterLimits
from cdk_adapters.deploy_check.settings import AdapterCheck
from cdk_adapters.endpoint.base_model_identity import BaseModelIdentity
from cdk_adapters.endpoint.components import AdapterInferenceComponent
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from cdk_adapters.gate import Acknowledgment
from cdk_adapters.hosting.model_data import ModelData
from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.manifest.gating import ManifestPlan, PlannedAdapter, plan_manifest, plan_manifest_file
from cdk_adapters.manifest.schema import BaseModelSpec
from cdk_adapters.monitoring.alarms import MonitoringAlarms

DEFAULT_PACKAGE_DIR = Path(tempfile.gettempdir()) / "cdk-adapters-packages"
"""Where synth writes archives of local adapter directories; file names carry the content hash."""


def model_data_for(scope: Construct, spec: BaseModelSpec, *, id: str = "BaseModelWeights") -> ModelData:
    """`ModelData` for the manifest's ``base_model.artifact`` (an S3 prefix or a ``.tar.gz``)."""
    url = parse_s3_url(spec.artifact)  # the schema accepts only s3:// artifacts
    bucket = s3.Bucket.from_bucket_name(scope, id, url.bucket)
    if spec.artifact.endswith(".tar.gz"):
        return ModelData.from_s3_archive(bucket, url.key)
    return ModelData.from_s3_prefix(bucket, url.key)


def endpoint_from_manifest(
    scope: Construct,
    id: str,
    *,
    manifest: str | PathLike[str] | ManifestPlan,
    vllm: VllmOptions | None = None,
    encryption_key: kms.IKey | None = None,
    **props: Any,
) -> MultiAdapterEndpoint:
    """An endpoint serving an adapter manifest: its base model, serving limits, adapter locations,
    every row and every alias.

    The compatibility gate runs first, on every row (`plan_manifest_file`): when anything is
    wrong, one `ConfigurationError` lists every problem and nothing is added to `scope`.

    :param manifest: the manifest's path, or a `ManifestPlan` that already passed the gate (gated
        again when it was planned for another ``enable_tower_connector_lora`` than `vllm`'s).
    :param vllm: engine options; the manifest's `max_loras`, `max_cpu_loras` and
        `max_lora_rank` replace those fields. Default `VllmOptions()`. Its
        ``enable_tower_connector_lora`` is what the gate checks the rows for (None: on when the
        manifest allows vision modules).
    :param encryption_key: KMS key of the manifest's adapter locations that declare no
        ``kms_key_arn``, when the objects use a customer managed key.
    :param props: every other `MultiAdapterEndpoint` option (``instances``, ``compute``, ``image``, ...).
        When rows opt into alarms (``alarms:``) and `props` has no ``alarms``, the endpoint gets
        `MonitoringAlarms()` (its defaults).
    """
    plan = gated_plan(manifest, vllm)
    if plan.alarm_overrides and props.get("alarms") is None:
        props["alarms"] = MonitoringAlarms()
    endpoint = MultiAdapterEndpoint(
        scope,
        id,
        **endpoint_props(scope, plan, vllm=vllm, weights_id=f"{id}BaseModelWeights", encryption_key=encryption_key),
        **props,
    )
    add_manifest_adapters(endpoint, plan)
    for alias, targets in plan.aliases.items():
        endpoint.add_alias(alias, targets)
    return endpoint


def gated_plan(manifest: str | PathLike[str] | ManifestPlan, vllm: VllmOptions | None) -> ManifestPlan:
    """`manifest` gated for the engine that will serve it: tower/connector LoRA as `vllm` sets it
    (a plan made for another setting is gated again)."""
    tower_connector_lora = vllm.enable_tower_connector_lora if vllm is not None else None
    if not isinstance(manifest, ManifestPlan):
        return plan_manifest_file(Path(manifest), tower_connector_lora=tower_connector_lora)
    if manifest.tower_connector_lora != tower_connector_lora:
        return plan_manifest(manifest.loaded, tower_connector_lora=tower_connector_lora)
    return manifest


def adapter_locations_for(
    scope: Construct, plan: ManifestPlan, *, encryption_key: kms.IKey | None = None, id_prefix: str = "AdapterLocationKey"
) -> list[AdapterLocation]:
    """`AdapterLocation`s for the manifest's ``adapter_locations`` (keys imported by ARN)."""
    locations = []
    for index, spec in enumerate(plan.manifest.adapter_locations):
        key = encryption_key
        if spec.kms_key_arn is not None:
            key = kms.Key.from_key_arn(scope, f"{id_prefix}{index}", spec.kms_key_arn)
        locations.append(AdapterLocation.from_s3_url(spec.url, encryption_key=key))
    return locations


def endpoint_props(
    scope: Construct,
    plan: ManifestPlan,
    *,
    vllm: VllmOptions | None = None,
    weights_id: str = "BaseModelWeights",
    encryption_key: kms.IKey | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `MultiAdapterEndpoint` taken from the manifest.

    ``MultiAdapterEndpoint(stack, "Endpoint", **endpoint_props(stack, plan), instances=Instances(...))``

    :param weights_id: construct ID, in `scope`, of the imported base-model bucket.
    """
    return {
        "model_data": model_data_for(scope, plan.manifest.base_model, id=weights_id),
        "adapter_locations": adapter_locations_for(
            scope, plan, encryption_key=encryption_key, id_prefix=f"{weights_id}LocationKey"
        ),
        "vllm": plan.vllm_options(vllm),
        "base_model": BaseModelIdentity(
            model_id=plan.manifest.base_model.id, revision=plan.manifest.base_model.revision, facts=plan.base
        ),
        "allow_vision_modules": plan.manifest.base_model.allow_vision_modules,
        **({"rank_tiers": plan.rank_tiers()} if plan.tier_ranks else {}),
    }


def add_manifest_adapters(
    endpoint: MultiAdapterEndpoint,
    plan: ManifestPlan,
    *,
    package_dir: Path | None = None,
) -> dict[str, AdapterInferenceComponent]:
    """Add one adapter inference component per manifest row, in manifest order.

    ``s3://`` rows are read through the endpoint's adapter locations (`endpoint_props` declares
    the manifest's); their KMS keys are the locations'. With rank tiers, each row's rank (from the
    lock or its files) picks its tier.

    :param package_dir: where local directories are packaged. Default `DEFAULT_PACKAGE_DIR`.
    """
    package_dir = Path(package_dir) if package_dir is not None else DEFAULT_PACKAGE_DIR
    components = {
        adapter.name: endpoint.add_adapter(
            adapter.name,
            artifact=_artifact_for(adapter, package_dir),
            acknowledge=_acknowledgment(adapter),
            limits=_limits(adapter),
            capture=_capture(adapter),
            rank=adapter.facts.max_rank if len(endpoint.tier_ranks) > 1 else None,
            tier=plan.tiers.get(adapter.name) if len(endpoint.tier_ranks) > 1 else None,
            **_check(endpoint, adapter),
        )
        for adapter in plan.adapters
    }
    for name, overrides in plan.alarm_overrides.items():
        endpoint.add_adapter_alarms(name, _threshold_overrides(overrides))
    return components


def _threshold_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """A row's ``alarms:`` mapping as `AlarmThresholds` fields (minutes become a Duration)."""
    converted = dict(overrides)
    if "period" in converted:
        converted["period"] = Duration.minutes(converted["period"])
    return converted


def package_local_adapter(adapter: PlannedAdapter, package_dir: Path) -> Path:
    """Package a local source to ``<package_dir>/<name>-<sha256[:16]>.tar.gz`` (content-addressed)."""
    assert adapter.local_dir is not None
    package_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=package_dir) as scratch:
        packaged = package_adapter(
            adapter.local_dir, Path(scratch) / "adapter.tar.gz", include_tokenizer=adapter.row.include_tokenizer
        )
        final = package_dir / f"{adapter.name}-{packaged.sha256[:16]}.tar.gz"
        packaged.path.replace(final)
    return final


def _limits(adapter: PlannedAdapter) -> AdapterLimits | None:
    """The row's ``limits:``, with the contract's defaults for what it leaves out."""
    given = adapter.row.limits
    return None if given is None else given.to_limits()


def _capture(adapter: PlannedAdapter) -> CaptureSettings | None:
    """The row's ``capture:``, with the contract's defaults for what it leaves out."""
    given = adapter.row.capture
    return None if given is None else given.to_settings()


def _check(endpoint: MultiAdapterEndpoint, adapter: PlannedAdapter) -> dict[str, Any]:
    """The row's ``check:`` for the endpoint's deploy check; an endpoint without one ignores it
    (the same manifest serves environments with the check on and off)."""
    given = adapter.row.check
    if given is None or endpoint.deploy_check is None:
        return {}
    return {"check": AdapterCheck(**given.model_dump(exclude_none=True))}


def _acknowledgment(adapter: PlannedAdapter) -> Acknowledgment | None:
    """The row's acknowledgment, which the endpoint honours as the manifest gate did."""
    given = adapter.row.acknowledgment
    if given is None:
        return None
    assert given.reason is not None, "the manifest schema requires an acknowledgment's reason"
    return Acknowledgment(given.rule, given.reason)


def _artifact_for(adapter: PlannedAdapter, package_dir: Path) -> AdapterArtifact:
    if adapter.local_dir is not None:
        return AdapterArtifact.from_archive(package_local_adapter(adapter, package_dir))
    return AdapterArtifact.from_s3_url(adapter.row.source)
