"""Side-by-side timing: candidates run interleaved in one process, so machine noise hits all alike."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterable, Mapping


def interleaved_medians(
    candidates: Mapping[str, Callable[[], object]],
    *,
    rounds: int,
    block: int = 1,
    discard_first: bool = False,
    before_block: Callable[[], object] | None = None,
) -> dict[str, float]:
    """Median wall seconds per candidate over `rounds`; each round runs every candidate `block` times.

    `discard_first` drops each block's first run: for candidates that pay a cost when they take over
    from another one (an idle server waking up), which is not the cost being measured.
    `before_block` runs, untimed, before each block (e.g. `wait_until_quiet`).
    """
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, run in candidates.items():
            if before_block is not None:
                before_block()
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


def process_group_cpu_seconds(group: int) -> float:
    """CPU seconds (user + system) used so far by the live processes of process group `group` (Linux)."""
    ticks = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while being read
            continue
        if int(fields[2]) == group:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def wait_until_quiet(groups: Iterable[int], *, below: float = 0.1, window_s: float = 0.2, timeout_s: float = 10) -> float:
    """Wait until the process groups together use under `below` of a core over `window_s`; seconds waited.

    vLLM's engine keeps polling its shared-memory queue on a full core for a second after its last
    message (``shm_broadcast``'s ``busy_loop_s``), so a server that just finished a phase takes a core
    from whichever candidate runs next on a machine with few cores. Call this before timing a phase.
    """
    groups = list(groups)
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        before = sum(process_group_cpu_seconds(group) for group in groups)
        time.sleep(window_s)
        if sum(process_group_cpu_seconds(group) for group in groups) - before < below * window_s:
            break
    return time.perf_counter() - started


def yield_to_clients(group: int, nice: int = 10) -> str:
    """Give the benchmark's own client processes precedence over server process group `group`; what was set.

    In production the tenants' clients run on other machines. Here they share a few cores with an
    engine whose two processes each poll a core while serving, and at equal priority the clients
    were left waiting to run: the flood could not keep its requests in flight, and the quiet
    client's own wait was counted as the server's latency. The server still gets every cycle the
    clients leave. Linux's autogroup (one per session) decides across sessions, so its nice is set
    too where the kernel has it.
    """
    os.setpriority(os.PRIO_PGRP, group, nice)
    try:
        with open(f"/proc/{group}/autogroup", "w") as autogroup:
            autogroup.write(str(nice))
    except OSError:
        return f"server processes at nice {nice}"
    return f"server processes and their session's autogroup at nice {nice}"
