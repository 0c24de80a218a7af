"""Side-by-side timing: candidates run interleaved in one process, so machine noise hits all alike."""

from __future__ import annotations

import statistics
import time
from typing import Callable, Mapping


def interleaved_medians(
    candidates: Mapping[str, Callable[[], object]], *, rounds: int, block: int = 1, discard_first: bool = False
) -> dict[str, float]:
    """Median wall seconds per candidate over `rounds`; each round runs every candidate `block` times.

    `discard_first` drops each block's first run: for candidates that pay a cost when they take over
    from another one (an idle server waking up), which is not the cost being measured.
    """
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, run in candidates.items():
            for index in range(block + (1 if discard_first else 0)):
                start = time.perf_counter()
                run()
                if index or not discard_first:
                    samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def print_table(title: str, medians: Mapping[str, float], *, baseline: str) -> None:
    """Median per candidate and its ratio to `baseline`."""
    print(f"\n{title}")
    print(f"  {'candidate':<44} {'median':>10} {'ratio':>8}")
    for name, seconds in medians.items():
        print(f"  {name:<44} {seconds * 1000:>8.1f}ms {seconds / medians[baseline]:>8.3f}")
