#!/usr/bin/env python3
"""Example app: one stack per environment, each serving LoRA adapters from one SageMaker endpoint.

    cdk synth                 # the dev environment (default)
    cdk synth -c env=prod     # another entry of "environments" in cdk.json

Synth needs no AWS account: stacks are environment-agnostic unless the chosen environment in
cdk.json names an "account" and "region". cdk-nag's AwsSolutions, HIPAA Security and NIST 800-53
rev 5 packs run on every synth; an unacknowledged finding fails it.
"""

from __future__ import annotations

from typing import Any, Mapping

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks
from constructs import Construct

from cdk_adapters.adapter_artifact import AdapterArtifact
from cdk_adapters.container_image import ContainerImage
from cdk_adapters.endpoint import MultiAdapterEndpoint
from cdk_adapters.inference_component import ComputeRequirements
from cdk_adapters.model_data import ModelData
from cdk_adapters.problems import ConfigurationError, Problem
from cdk_adapters.vllm_options import VllmOptions

DEFAULT_ENVIRONMENT = "dev"
REQUIRED_KEYS = ("stack_name", "instance_type", "model_bucket", "model_prefix", "min_memory_required_in_mb")


class AdapterServingStack(cdk.Stack):
    """One environment's endpoint, configured from its entry in cdk.json's "environments"."""

    def __init__(self, scope: Construct, id: str, *, settings: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        models = s3.Bucket.from_bucket_name(self, "ModelBucket", settings["model_bucket"])
        image_uri = settings.get("image_uri")
        self.endpoint = MultiAdapterEndpoint(
            self,
            "Serving",
            model_data=ModelData.from_s3_prefix(models, settings["model_prefix"]),
            image=ContainerImage.from_digest_uri(image_uri) if image_uri else ContainerImage.from_asset(),
            compute=ComputeRequirements(
                min_memory_required_in_mb=settings["min_memory_required_in_mb"],
                accelerator_devices=settings.get("accelerator_devices", 1),
            ),
            vllm=VllmOptions(**settings.get("vllm", {})),
            instance_type=settings["instance_type"],
            initial_instance_count=settings.get("initial_instance_count", 1),
            min_instance_count=settings.get("min_instance_count"),
            max_instance_count=settings.get("max_instance_count"),
            copy_count=settings.get("copy_count", 1),
            base_model_id=settings.get("base_model_id"),
            base_model_revision=settings.get("base_model_revision"),
        )
        for adapter in settings.get("adapters", []):
            self.endpoint.add_adapter(adapter["name"], artifact=AdapterArtifact.from_s3_url(adapter["s3_url"]))


def environment_settings(app: cdk.App) -> tuple[str, dict[str, Any]]:
    """The chosen environment's name and settings, or a `ConfigurationError` saying what is wrong."""
    name = app.node.try_get_context("env") or DEFAULT_ENVIRONMENT
    environments = app.node.try_get_context("environments") or {}
    if name not in environments:
        known = ", ".join(sorted(environments)) or "none"
        raise ConfigurationError([Problem("cdk.json", f"context.environments.{name}", f"is not defined (defined: {known})")])
    settings = dict(environments[name])
    missing = [Problem("cdk.json", f"context.environments.{name}.{key}", "is required") for key in REQUIRED_KEYS if key not in settings]
    if missing:
        raise ConfigurationError(missing)
    return name, settings


def build(app: cdk.App) -> AdapterServingStack:
    """Add the chosen environment's stack and the nag packs to `app`."""
    name, settings = environment_settings(app)
    account, region = settings.get("account"), settings.get("region")
    stack = AdapterServingStack(
        app,
        settings["stack_name"],
        settings=settings,
        env=cdk.Environment(account=account, region=region) if account or region else None,
        description=f"cdk-adapters: multi-adapter LoRA endpoint ({name})",
        termination_protection=bool(settings.get("termination_protection", False)),
    )
    cdk.Tags.of(stack).add("cdk-adapters:environment", name)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), HIPAASecurityChecks(app), NIST80053R5Checks(app))
    return stack


def main() -> None:
    app = cdk.App()
    build(app)
    app.synth()


if __name__ == "__main__":
    main()
