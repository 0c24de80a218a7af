"""Will the base model, the LoRA slots and the CPU cache fit on the instance?

GPU, per GPU (the model is split over the instance's GPUs with tensor parallelism):
``base weights / GPUs + max_loras x slot + KV cache for one max_model_len sequence / GPUs`` must stay
within ``GPU memory x gpu_memory_utilization`` (vLLM's own budget; it refuses to start when the KV
cache cannot hold one sequence of ``max_model_len`` tokens). With more than one GPU the LoRA slots are
counted whole on every GPU: vLLM shards only some of them (``fully_sharded_loras`` is off), so this
is an upper bound.

Host: ``max_cpu_loras x the largest adapter`` must stay within host memory less a reserve for the
OS, SageMaker's agents and the server processes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from cdk_adapters.hosting.instance_types import INSTANCE_TYPES, GpuInstanceType
from cdk_adapters.problems import Problem

GIB = 1024**3
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's default ``--gpu-memory-utilization``."""
DEFAULT_MAX_MODEL_LEN = 8192
DEFAULT_HOST_RESERVE_GIB = 8.0


@dataclass(frozen=True)
class AdapterSize:
    name: str
    host_bytes: int
    basis: str
    """``adapter files`` (exact) or ``lock facts`` (rank x targets x base shapes)."""


@dataclass(frozen=True)
class MemoryInputs:
    instance: GpuInstanceType
    dtype: str
    base_weight_bytes: int
    slot_bytes: int
    kv_bytes_per_token: int
    max_loras: int
    max_cpu_loras: int
    max_lora_rank: int
    adapters: tuple[AdapterSize, ...]
    active_adapters: int
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    host_reserve_gib: float = DEFAULT_HOST_RESERVE_GIB


@dataclass(frozen=True)
class MemoryPlan:
    inputs: MemoryInputs
    gpu_budget_bytes: float
    """Per GPU: memory x gpu_memory_utilization."""
    base_per_gpu_bytes: float
    lora_per_gpu_bytes: int
    kv_reserve_per_gpu_bytes: float
    gpu_left_bytes: float
    """Per GPU, after all of the above: more KV cache (more concurrent requests)."""
    largest_adapter: AdapterSize | None
    host_cache_bytes: int
    host_budget_bytes: float
    max_loras_that_fit: int
    max_cpu_loras_that_fit: int | None
    recommended_max_loras: int
    recommended_max_cpu_loras: int
    problems: tuple[Problem, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())


def _gib(value: float) -> str:
    return f"{value / GIB:.2f} GiB"


def _bigger_instances(instance: GpuInstanceType, needed_per_gpu: float, utilisation: float) -> list[str]:
    """Same-GPU-count (or larger) types whose GPUs hold `needed_per_gpu`, cheapest-looking first."""
    candidates = [
        row
        for row in INSTANCE_TYPES.values()
        if row.gpu_memory_gib * GIB * utilisation >= needed_per_gpu and row.gpu_count == instance.gpu_count
    ]
    candidates.sort(key=lambda row: (row.gpu_memory_gib, row.vcpus))
    return [row.name for row in candidates[:2]]


def plan_memory(inputs: MemoryInputs) -> MemoryPlan:
    instance = inputs.instance
    gpus = instance.gpu_count
    budget = instance.gpu_memory_gib * GIB * inputs.gpu_memory_utilization
    base = inputs.base_weight_bytes / gpus
    lora = inputs.max_loras * inputs.slot_bytes
    kv = inputs.kv_bytes_per_token * inputs.max_model_len / gpus
    left = budget - base - lora - kv
    fit_slots = max(0, math.floor((budget - base - kv) / inputs.slot_bytes)) if inputs.slot_bytes else 0
    largest = max(inputs.adapters, key=lambda a: a.host_bytes, default=None)
    host_budget = instance.host_memory_gib * GIB - inputs.host_reserve_gib * GIB
    cache = inputs.max_cpu_loras * (largest.host_bytes if largest else 0)
    fit_cache = math.floor(host_budget / largest.host_bytes) if largest and largest.host_bytes else None
    problems = _gpu_problems(inputs, budget, base, lora, kv, left, fit_slots)
    if largest is not None and cache > host_budget:
        problems.append(_host_cache_problem(inputs, largest, cache, host_budget, fit_cache))
    recommended_loras, recommended_cpu, notes = _recommendations(inputs, fit_slots, fit_cache)
    if gpus > 1:
        notes.append("more than one GPU: LoRA slots counted whole on each GPU (an upper bound)")
    return MemoryPlan(
        inputs=inputs,
        gpu_budget_bytes=budget,
        base_per_gpu_bytes=base,
        lora_per_gpu_bytes=lora,
        kv_reserve_per_gpu_bytes=kv,
        gpu_left_bytes=left,
        largest_adapter=largest,
        host_cache_bytes=cache,
        host_budget_bytes=host_budget,
        max_loras_that_fit=fit_slots,
        max_cpu_loras_that_fit=fit_cache,
        recommended_max_loras=recommended_loras,
        recommended_max_cpu_loras=recommended_cpu,
        problems=tuple(problems),
        notes=tuple(notes),
    )


def _gpu_problems(
    inputs: MemoryInputs, budget: float, base: float, lora: int, kv: float, left: float, fit_slots: int
) -> list[Problem]:
    """The base model that does not fit a GPU at all, or else the LoRA slots that do not fit beside it."""
    instance = inputs.instance
    gpu_text = f"{instance.gpu_memory_gib:g} GiB x {inputs.gpu_memory_utilization:g}"
    if base + kv > budget:
        bigger = _bigger_instances(instance, base + kv + inputs.slot_bytes, inputs.gpu_memory_utilization)
        return [
            Problem(
                f"instance type '{instance.name}'",
                "GPU memory",
                f"the base model alone does not fit: weights {_gib(base)} + KV cache for one {inputs.max_model_len}-token "
                f"sequence {_gib(kv)} per GPU exceed the {_gib(budget)} vLLM may use ({gpu_text}) by {_gib(base + kv - budget)}; "
                f"choose an instance with more GPU memory{' (' + ', '.join(bigger) + ')' if bigger else ''}, "
                "a smaller --max-model-len, or a quantized base",
            )
        ]
    if left < 0:
        return [
            Problem(
                "serving",
                "max_loras",
                f"{inputs.max_loras} GPU slots x {_gib(inputs.slot_bytes)} (every LoRA-capable module at max_lora_rank "
                f"{inputs.max_lora_rank}) = {_gib(lora)} do not fit on {instance.name}: base {_gib(base)} + slots + KV cache "
                f"{_gib(kv)} exceed the {_gib(budget)} per GPU vLLM may use ({gpu_text}) by {_gib(-left)}; "
                f"set max_loras to {fit_slots} or less, lower max_lora_rank, or choose a larger instance",
            )
        ]
    return []


def _host_cache_problem(
    inputs: MemoryInputs, largest: AdapterSize, cache: int, host_budget: float, fit_cache: int | None
) -> Problem:
    """The CPU cache of `max_cpu_loras` copies of the largest adapter exceeds the host memory left."""
    instance = inputs.instance
    return Problem(
        "serving",
        "max_cpu_loras",
        f"{inputs.max_cpu_loras} cached adapters x {_gib(largest.host_bytes)} (the largest, '{largest.name}') = "
        f"{_gib(cache)} exceed the host memory left on {instance.name} ({instance.host_memory_gib:g} GiB - "
        f"{inputs.host_reserve_gib:g} GiB reserve = {_gib(host_budget)}) by {_gib(cache - host_budget)}; set "
        f"max_cpu_loras to {max(fit_cache or 0, 0)} or less, or choose an instance with more host memory",
    )


def _recommendations(inputs: MemoryInputs, fit_slots: int, fit_cache: int | None) -> tuple[int, int, list[str]]:
    """The recommended ``max_loras`` and ``max_cpu_loras`` for the active adapters, and notes on what they cost."""
    notes: list[str] = []
    active = max(1, inputs.active_adapters)
    recommended_loras = max(1, min(active, fit_slots)) if fit_slots else 1
    recommended_cpu = max(recommended_loras, active)
    if fit_cache is not None and recommended_cpu > fit_cache:
        notes.append(
            f"{active} active adapters but the host cache holds only {fit_cache}: the others pay an S3 fetch "
            "when they are called after falling out (cold start)"
        )
        recommended_cpu = max(recommended_loras, fit_cache)
    if active > recommended_loras:
        notes.append(
            f"{active} active adapters share {recommended_loras} GPU slots: adapters swap in from the CPU cache "
            "(fast, no S3), but a batch mixes at most max_loras adapters"
        )
    return recommended_loras, recommended_cpu, notes


__all__ = [
    "DEFAULT_GPU_MEMORY_UTILIZATION",
    "DEFAULT_HOST_RESERVE_GIB",
    "DEFAULT_MAX_MODEL_LEN",
    "GIB",
    "AdapterSize",
    "MemoryInputs",
    "MemoryPlan",
    "plan_memory",
]
