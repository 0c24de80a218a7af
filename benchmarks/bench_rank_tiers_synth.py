"""Synth time and template size of one endpoint of 1,000 adapters with one, two and four rank tiers.

The adapters' ranks cycle over 8, 16, 32, 64 and 128, so every configuration holds them all: one
tier serves rank 128 for everyone (today's only choice), two tiers split at 16, four at 16, 32 and
64. Each synth runs in a fresh process (jsii's Node process keeps every object it made), after a
10-adapter warm-up there, and the candidates alternate over the rounds, so machine noise hits all
alike. A tier adds a model, a base component and a log group, whatever the adapter count, so the
ratios should stay near 1.

    .venv/bin/python -m benchmarks.bench_rank_tiers_synth [--rounds 3] [--adapters 1000]
    .venv/bin/python -m benchmarks.bench_rank_tiers_synth --one TIERS ADAPTERS   # seconds and bytes of one synth
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
from cdk_adapters.endpoint.endpoint import MultiAdapterEndpoint
from cdk_adapters.endpoint.rank_tiers import RankTier
from cdk_adapters.hosting.container_image import ContainerImage
from cdk_adapters.hosting.instances import Instances
from cdk_adapters.hosting.model_data import ModelData
from cdk_adapters.hosting.vllm_options import VllmOptions

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/cdk-adapters-vllm@sha256:" + "ab" * 32
LOCATION = "s3://bench-adapters/published/"
RANKS = (8, 16, 32, 64, 128)
TIER_RANKS = {1: (128,), 2: (16, 128), 4: (16, 32, 64, 128)}
"""Tier count -> every tier's rank, the first being the endpoint's own."""


def tiered_app(tiers: int, adapters: int, outdir: str) -> int:
    """Synthesize the endpoint; the bytes of every template it wrote."""
    app = cdk.App(outdir=outdir)
    stack = cdk.Stack(app, "Bench")
    first, *above = TIER_RANKS[tiers]
    endpoint = MultiAdapterEndpoint(
        stack,
        "Serving",
        model_data=ModelData.from_s3_prefix(s3.Bucket.from_bucket_name(stack, "Models", "bench-models"), "base/"),
        image=ContainerImage.from_digest_uri(IMAGE),
        compute=ComputeRequirements(min_memory_required_in_mb=16384),
        adapter_locations=[AdapterLocation.from_s3_url(LOCATION)],
        instances=Instances(instance_type="ml.g6.48xlarge"),
        vllm=VllmOptions(max_lora_rank=first),
        rank_tiers=[RankTier(max_lora_rank=rank) for rank in above],
    )
    for index in range(adapters):
        name = f"tenant-{index:05d}-v1"
        endpoint.add_adapter(
            name, artifact=AdapterArtifact.from_s3_url(f"{LOCATION}{name}/adapter.tar.gz"), rank=RANKS[index % len(RANKS)]
        )
    app.synth()
    return sum(path.stat().st_size for path in Path(outdir).glob("*.template.json"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--adapters", type=int, default=1000)
    parser.add_argument("--one", type=int, nargs=2, metavar=("TIERS", "ADAPTERS"), help="time one synth: seconds, bytes")
    args = parser.parse_args()
    if args.one:
        tiers, adapters = args.one
        with tempfile.TemporaryDirectory() as warm:
            tiered_app(tiers, 10, warm)
        with tempfile.TemporaryDirectory() as outdir:
            started = time.perf_counter()
            size = tiered_app(tiers, adapters, outdir)
            print(f"{time.perf_counter() - started:.3f} {size}")
        return 0
    names = {tiers: f"{tiers} tier{'s' if tiers > 1 else ''}, {args.adapters:,} adapters" for tiers in TIER_RANKS}
    seconds: dict[str, list[float]] = {name: [] for name in names.values()}
    sizes: dict[str, int] = {}
    for _ in range(args.rounds):
        for tiers, name in names.items():
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.bench_rank_tiers_synth", "--one", str(tiers), str(args.adapters)],
                capture_output=True,
                text=True,
                check=True,
            )
            elapsed, size = done.stdout.strip().splitlines()[-1].split()
            seconds[name].append(float(elapsed))
            sizes[name] = int(size)
    baseline = names[1]
    print_table(
        f"rank tiers: synth (median seconds of {args.rounds} rounds, a fresh process each)",
        {name: statistics.median(values) for name, values in seconds.items()},
        baseline=baseline,
    )
    print("\ntemplate bytes (the stack and its shards)")
    for name, size in sizes.items():
        print(f"  {name:<28} {size:>12,}  {size / sizes[baseline]:.3f}x")
    print(json.dumps({"tier_ranks": {str(k): v for k, v in TIER_RANKS.items()}, "adapter_ranks": RANKS}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
