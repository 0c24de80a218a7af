"""Fleet-sized inputs: a manifest of N published adapters with its lock file, and its synth.

The rows copy the example manifest's base model and one locked adapter's facts under new names
and URLs (the gate checks facts, not bytes, for published rows), so a 1,000-row manifest costs
milliseconds to write and passes the real gate.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import aws_cdk as cdk
import yaml
from cdk_nag import AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks

from cdk_adapters.endpoint.components import ComputeRequirements
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.manifest import endpoint_from_manifest
from tests.constructs.conftest import DIGEST_IMAGE, REPO_ROOT

EXAMPLE_MANIFEST = REPO_ROOT / "manifests" / "example.yaml"
LOCATION = "s3://fleet-adapters/published/"
STACK = "Fleet-Scale"


def adapter_name(index: int) -> str:
    return f"tenant-{index:04d}-v1"


def write_fleet_manifest(directory: Path, indices: Iterable[int]) -> Path:
    """A manifest (and lock) serving adapters `tenant-<index>-v1` for each index, in order."""
    manifest = yaml.safe_load(EXAMPLE_MANIFEST.read_text())
    lock = json.loads(EXAMPLE_MANIFEST.with_suffix(".lock.json").read_text())
    template = lock["adapters"]["support-en-v1"]
    manifest["adapter_locations"] = [LOCATION]
    manifest["adapters"], lock["adapters"] = [], {}
    for index in indices:
        name = adapter_name(index)
        uri = f"{LOCATION}{name}/adapter.tar.gz"
        manifest["adapters"].append({"name": name, "source": uri, "owner": "fleet@example.com"})
        lock["adapters"][name] = dict(template, uri=uri, sha256=f"{index:064x}")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "fleet.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    path.with_suffix(".lock.json").write_text(json.dumps(lock, indent=1))
    return path


def synth_fleet(manifest: Path, outdir: Path, *, nag: bool = False, **props) -> Path:
    """Synthesize a one-endpoint app serving `manifest` into `outdir` (a cloud assembly).

    Asset and path metadata are on, as the CDK CLI sets them: nested templates are findable from
    the parent, and diffs name each resource's construct path.
    """
    app = cdk.App(outdir=str(outdir), context={"aws:cdk:enable-asset-metadata": True, "aws:cdk:enable-path-metadata": True})
    stack = cdk.Stack(app, STACK)
    endpoint_from_manifest(
        stack,
        "Serving",
        manifest=manifest,
        image=ContainerImage.from_digest_uri(DIGEST_IMAGE),
        compute=ComputeRequirements(min_memory_required_in_mb=16384),
        **props,
    )
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), HIPAASecurityChecks(app), NIST80053R5Checks(app))
    app.synth()
    return outdir
