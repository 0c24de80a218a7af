#!/usr/bin/env python3
"""Example app: one stack per environment, each serving the manifest's LoRA adapters from one endpoint.

    cdk synth                                  # the dev environment (default)
    cdk synth -c env=prod                      # another entry of "environments" in cdk.json
    cdk synth -c manifest=manifests/other.yaml # another adapter manifest

What is served (base model, serving limits, adapters) comes from the adapter manifest
(`manifests/example.yaml` unless the environment or ``-c manifest=PATH`` names another); how it is
hosted (instance type and count, scaling, copies) comes from the environment's entry in cdk.json.
Synth needs no AWS account: stacks are environment-agnostic unless the chosen environment names
an "account" and "region". cdk-nag's AwsSolutions, HIPAA Security and NIST 800-53 rev 5 packs run
on every synth; an unacknowledged finding fails it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks
from constructs import Construct

from cdk_adapters.container_image import ContainerImage
from cdk_adapters.fleet import FleetPlacement
from cdk_adapters.inference_component import ComputeRequirements
from cdk_adapters.manifest import DEFAULT_MANIFEST_PATH, ManifestPlan, endpoint_from_manifest, plan_manifest_file
from cdk_adapters.problems import ConfigurationError, Problem
from cdk_adapters.vllm_options import VllmOptions

DEFAULT_ENVIRONMENT = "dev"
REQUIRED_KEYS = ("stack_name", "instance_type", "min_memory_required_in_mb")
HERE = Path(__file__).resolve().parent


class AdapterServingStack(cdk.Stack):
    """One environment's endpoint: hosting from cdk.json, base model and adapters from the manifest."""

    def __init__(
        self, scope: Construct, id: str, *, settings: Mapping[str, Any], plan: ManifestPlan, **kwargs: Any
    ) -> None:
        super().__init__(scope, id, **kwargs)
        image_uri = settings.get("image_uri")
        self.endpoint = endpoint_from_manifest(
            self,
            "Serving",
            manifest=plan,
            vllm=VllmOptions(**settings.get("vllm", {})),
            image=ContainerImage.from_digest_uri(image_uri) if image_uri else ContainerImage.from_asset(),
            compute=ComputeRequirements(
                min_memory_required_in_mb=settings["min_memory_required_in_mb"],
                accelerator_devices=settings.get("accelerator_devices", 1),
            ),
            instance_type=settings["instance_type"],
            initial_instance_count=settings.get("initial_instance_count", 1),
            min_instance_count=settings.get("min_instance_count"),
            max_instance_count=settings.get("max_instance_count"),
            copy_count=settings.get("copy_count", 1),
            placement=FleetPlacement(**settings.get("placement", {})),
        )


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
    return name, settings, missing


def manifest_path(app: cdk.App, settings: Mapping[str, Any]) -> Path:
    """``-c manifest=PATH`` first, then the environment's "manifest", then the default."""
    chosen = Path(app.node.try_get_context("manifest") or settings.get("manifest") or DEFAULT_MANIFEST_PATH)
    return chosen if chosen.is_absolute() else HERE / chosen


def build(app: cdk.App) -> AdapterServingStack:
    """Add the chosen environment's stack and the nag packs to `app`, or raise every problem found."""
    name, settings, problems = environment_settings(app)
    plan = None
    try:
        plan = plan_manifest_file(manifest_path(app, settings))
    except ConfigurationError as error:
        problems += error.problems
    if problems or plan is None:
        raise ConfigurationError(problems, heading=f"cannot synthesize environment '{name}'")
    account, region = settings.get("account"), settings.get("region")
    stack = AdapterServingStack(
        app,
        settings["stack_name"],
        settings=settings,
        plan=plan,
        env=cdk.Environment(account=account, region=region) if account or region else None,
        description=f"cdk-adapters: multi-adapter LoRA endpoint ({name})",
        termination_protection=bool(settings.get("termination_protection", False)),
    )
    cdk.Tags.of(stack).add("cdk-adapters:environment", name)
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
