"""Synth of a service of 10 cells holding 10,000 adapters, next to one cell of 1,000.

Each candidate builds an app with `AdapterService` and synthesizes it to a cloud assembly in a
fresh process (jsii's Node process keeps every object of every app a process made, so a long run in
one process slows down as its heap grows); the process warms jsii up with a 10-adapter app first
and reports only the timed synth. Candidates alternate over the rounds, so machine noise hits both
alike; the ratio is what ten cells cost against one (goal: linear, at most 10.5x). One more run of the large service then checks what it
wrote: every template through cfn-lint, the nag packs (AwsSolutions, HIPAA, NIST 800-53 rev 5) on
the whole app, the largest template's resource count against CloudFormation's 500, each cell's
adapter count, and the service record's size.

    .venv/bin/python -m benchmarks.bench_service_synth [--rounds 3] [--cells 10] [--per-cell 1000] [--no-lint]
    .venv/bin/python -m benchmarks.bench_service_synth --one CELLS ADAPTERS   # one timed synth, in seconds
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3

from benchmarks._timing import print_table
from cdk_adapters.artifacts.artifact import AdapterArtifact
from cdk_adapters.artifacts.location import AdapterLocation
from cdk_adapters.endpoint.components import ComputeRequirements
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.hosting.model_data import ModelData
from cdk_adapters.service import AdapterService

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/cdk-adapters-vllm@sha256:" + "ab" * 32
LOCATION = "s3://bench-adapters/published/"
CFN_MAX_RESOURCES = 500


def cell_props(stack: cdk.Stack, _cell: str) -> dict:
    return {
        "model_data": ModelData.from_s3_prefix(s3.Bucket.from_bucket_name(stack, "Models", "bench-models"), "base/"),
        "image": ContainerImage.from_digest_uri(IMAGE),
        "compute": ComputeRequirements(min_memory_required_in_mb=16384),
        "adapter_locations": [AdapterLocation.from_s3_url(LOCATION)],
    }


def service_app(cells: int, adapters: int, outdir: str, *, nag: bool = False) -> AdapterService:
    app = cdk.App(outdir=outdir)
    service = AdapterService(app, "Bench", cells=cells, endpoint_props=cell_props, cell_cap=adapters // cells * 2)
    for index in range(adapters):
        name = f"tenant-{index:05d}-v1"
        service.add_adapter(name, artifact=AdapterArtifact.from_s3_url(f"{LOCATION}{name}/adapter.tar.gz"))
    if nag:
        from cdk_nag import AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks

        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), HIPAASecurityChecks(app), NIST80053R5Checks(app))
    app.synth()
    return service


def check_large(cells: int, adapters: int, lint: bool) -> None:
    """What the large service wrote: valid templates, nag clean, within budgets, the record's size."""
    with tempfile.TemporaryDirectory() as outdir:
        started = time.perf_counter()
        service = service_app(cells, adapters, outdir, nag=True)
        print(f"\nsynth of {adapters:,} adapters over {cells} cells with the nag packs: {time.perf_counter() - started:.1f} s")
        templates = sorted(Path(outdir).glob("*.template.json"))
        sizes = {path.name: len(json.loads(path.read_text())["Resources"]) for path in templates}
        print(
            f"templates: {len(templates)}; most resources in one: {max(sizes.values())} (CloudFormation allows {CFN_MAX_RESOURCES})"
        )
        report = Path(outdir) / "validation-report.json"
        failed = (
            [p for p in json.loads(report.read_text())["pluginReports"] if p.get("conclusion") == "failure"]
            if report.is_file()
            else []
        )
        print(f"nag packs: {'no unacknowledged findings' if not failed else f'{len(failed)} failed plugin(s)'}")
        counts = {cell.name: len(cell.endpoint.adapter_component_names()) for cell in service.cells}
        print(f"adapters per cell: min {min(counts.values())}, max {max(counts.values())}, cap {service.cell_cap}")
        print(f"service record: {len(service.service_record().to_json()):,} characters")
        if lint:
            started = time.perf_counter()
            linted = subprocess.run(
                [str(Path(sys.executable).parent / "cfn-lint"), *map(str, templates)], capture_output=True, text=True
            )
            verdict = "every template valid" if linted.returncode == 0 else f"failed:\n{linted.stdout[-2000:]}"
            print(f"cfn-lint ({time.perf_counter() - started:.0f} s): {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cells", type=int, default=10)
    parser.add_argument("--per-cell", type=int, default=1000)
    parser.add_argument("--no-lint", action="store_true")
    parser.add_argument("--one", type=int, nargs=2, metavar=("CELLS", "ADAPTERS"), help="time one synth and print its seconds")
    args = parser.parse_args()
    small, large = args.per_cell, args.per_cell * args.cells

    if args.one:
        cells, adapters = args.one
        with tempfile.TemporaryDirectory() as warm:
            service_app(1, 10, warm)
        with tempfile.TemporaryDirectory() as outdir:
            started = time.perf_counter()
            service_app(cells, adapters, outdir)
            print(f"{time.perf_counter() - started:.3f}")
        return 0
    candidates = {f"1 cell, {small:,} adapters": (1, small), f"{args.cells} cells, {large:,} adapters": (args.cells, large)}
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(args.rounds):
        for name, (cells, adapters) in candidates.items():
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.bench_service_synth", "--one", str(cells), str(adapters)],
                capture_output=True,
                text=True,
                check=True,
            )
            samples[name].append(float(done.stdout.strip().splitlines()[-1]))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print_table(
        f"service synth (median seconds of {args.rounds} rounds, a fresh process each)",
        medians,
        baseline=f"1 cell, {small:,} adapters",
    )
    check_large(args.cells, large, not args.no_lint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
