"""How often adapters move in and out of vLLM's caches, for a request mix: an LRU replay.

vLLM keeps `max_loras` adapters in GPU slots and `max_cpu_loras` in host memory, each least recently
used first out, and touches both on every request it schedules. A request whose adapter has no GPU
slot swaps it in from host memory (`lora_kernels.SWAP_FROM_HOST_MS`); one that is not in host memory
either is loaded from the instance's disk first (SageMaker fetched the files from S3 when the
adapter's component was created, so a host miss reads local disk, not S3; its time is not measured).

`replay` draws `requests` requests from the mix's rates (seeded, so a plan is reproducible) and
counts both kinds of miss, request by request: a batch's adapters all need slots at once, and with
more distinct adapters in flight than `max_loras` vLLM also makes requests wait, which this does not
model. `zipf_rates` gives a skewed mix for a what-if.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_REQUESTS = 200_000
MAX_REQUESTS = 10_000_000


@dataclass(frozen=True)
class SwapEstimate:
    requests: int
    gpu_misses: int
    """Requests whose adapter had no GPU slot: a swap in from host memory."""
    host_misses: int
    """Of those, requests whose adapter was not in host memory either: a load from disk first."""

    @property
    def gpu_miss_rate(self) -> float:
        return self.gpu_misses / self.requests if self.requests else 0.0

    @property
    def host_miss_rate(self) -> float:
        return self.host_misses / self.requests if self.requests else 0.0


def replay(
    rates: Mapping[str, float],
    *,
    gpu_slots: int,
    host_slots: int,
    requests: int = DEFAULT_REQUESTS,
    seed: int = 0,
) -> SwapEstimate:
    """Misses of `requests` requests drawn from `rates` (adapter -> requests per minute, any scale)."""
    if gpu_slots < 1 or host_slots < gpu_slots:
        raise ValueError(f"need 1 <= gpu_slots <= host_slots, got {gpu_slots} and {host_slots}")
    if not 1 <= requests <= MAX_REQUESTS:
        raise ValueError(f"requests must be from 1 to {MAX_REQUESTS:,}, got {requests}")
    names = sorted(name for name, rate in rates.items() if rate > 0)
    if not names:
        return SwapEstimate(requests, 0, 0)
    draws = random.Random(seed).choices(names, weights=[rates[name] for name in names], k=requests)
    gpu: OrderedDict[str, None] = OrderedDict()
    host: OrderedDict[str, None] = OrderedDict()
    gpu_misses = host_misses = 0
    for name in draws:
        if name in host:
            host.move_to_end(name)
        else:
            host_misses += 1
            host[name] = None
            if len(host) > host_slots:
                host.popitem(last=False)
        if name in gpu:
            gpu.move_to_end(name)
            continue
        gpu_misses += 1
        gpu[name] = None
        if len(gpu) > gpu_slots:
            gpu.popitem(last=False)
    return SwapEstimate(requests, gpu_misses, host_misses)


def zipf_rates(count: int, exponent: float, total_rpm: float) -> dict[str, float]:
    """`count` tenants sharing `total_rpm`, the k-th busiest with weight 1/k^`exponent`."""
    weights = [1 / (k**exponent) for k in range(1, count + 1)]
    scale = total_rpm / sum(weights)
    return {f"tenant-{k}": weight * scale for k, weight in enumerate(weights, start=1)}


__all__ = ["DEFAULT_REQUESTS", "SwapEstimate", "replay", "zipf_rates"]
