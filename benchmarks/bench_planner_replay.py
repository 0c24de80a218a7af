"""The planner's LRU replay at fleet size: 1,000 adapters (a Zipf mix) x 10^5 and 10^6 requests.

`cdk-adapters plan` replays 200,000 requests by default; this shows what the replay costs as the
mix and the request count grow, side by side in one run (`interleaved_medians`), and that the time
grows with the requests (10x the requests: about 10x the time), not with the adapters.

    .venv/bin/python -m benchmarks.bench_planner_replay [--rounds N]
"""

from __future__ import annotations

import argparse
import sys

from benchmarks._timing import interleaved_medians, print_table
from cdk_adapters.planner.swaps import replay, zipf_rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    mixes = {count: zipf_rates(count, 1.0, 1000.0) for count in (100, 1000)}
    runs = {
        f"{count} adapters x {requests:,} requests": (
            lambda rates=mixes[count], n=requests: replay(rates, gpu_slots=16, host_slots=64, requests=n)
        )
        for count in mixes
        for requests in (100_000, 1_000_000)
    }
    medians = interleaved_medians(runs, rounds=args.rounds)
    print_table(
        f"LRU replay, max_loras 16, max_cpu_loras 64 (median of {args.rounds} interleaved rounds)",
        medians,
        baseline="1000 adapters x 100,000 requests",
    )
    growth = medians["1000 adapters x 1,000,000 requests"] / medians["1000 adapters x 100,000 requests"]
    fleet = medians["1000 adapters x 1,000,000 requests"] / medians["100 adapters x 1,000,000 requests"]
    print(f"\n10x the requests: {growth:.2f}x the time; 10x the adapters (same requests): {fleet:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
