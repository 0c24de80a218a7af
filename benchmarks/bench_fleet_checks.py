"""How the manifest gate's fleet-wide work grows with the fleet: linear (or n log n), not quadratic.

Two workloads, each at two sizes ten times apart, interleaved in one process:
* the endpoint-wide checks (unique names, version suffixes, identical target modules) on N
  adapters, a third of which target other modules (so every third one yields a finding);
* the whole manifest gate (`plan_manifest_file`: YAML, schema, lock, per-row checks, fleet checks)
  on an N-row manifest of published adapters.
A growth t(10N)/t(N) near 10 is linear; quadratic work would show near 100.

    .venv/bin/python -m benchmarks.bench_fleet_checks [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from benchmarks._timing import interleaved_medians, print_table
from cdk_adapters.gate import CoHostedAdapter
from cdk_adapters.gate.checks.co_hosted import CO_HOSTED_CHECKS
from cdk_adapters.manifest import plan_manifest_file
from tests.fleet.builders import write_fleet_manifest

ATTENTION = ("k_proj", "o_proj", "q_proj", "v_proj")


def adapters(count: int) -> list[CoHostedAdapter]:
    return [CoHostedAdapter(f"tenant-{i:05d}-v1", ATTENTION if i % 3 else ("q_proj", "v_proj")) for i in range(count)]


def run_checks(fleet: list[CoHostedAdapter]) -> None:
    for check in CO_HOSTED_CHECKS:
        check(fleet)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    small, large = adapters(1_000), adapters(10_000)
    checks = interleaved_medians(
        {"fleet checks, 1,000 adapters": lambda: run_checks(small), "fleet checks, 10,000 adapters": lambda: run_checks(large)},
        rounds=args.rounds,
    )
    print_table("endpoint-wide checks", checks, baseline="fleet checks, 1,000 adapters")
    with tempfile.TemporaryDirectory() as scratch:
        manifests = {count: write_fleet_manifest(Path(scratch) / str(count), range(count)) for count in (100, 1_000)}
        gate = interleaved_medians(
            {f"manifest gate, {count:,} rows": (lambda path=path: plan_manifest_file(path)) for count, path in manifests.items()},
            rounds=args.rounds,
        )
    print_table("whole manifest gate", gate, baseline="manifest gate, 100 rows")
    print("\ngrowth for ten times the adapters (10 = linear, 100 = quadratic):")
    print(f"  endpoint-wide checks  {checks['fleet checks, 10,000 adapters'] / checks['fleet checks, 1,000 adapters']:.1f}")
    print(f"  whole manifest gate   {gate['manifest gate, 1,000 rows'] / gate['manifest gate, 100 rows']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
