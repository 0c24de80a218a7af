"""How many output tokens per second one instance sustains, per GPU model, for a model size.

LLM decoding under load is bound by GPU memory bandwidth: every step reads all weights once for
the whole batch. So one measured figure per model size, scaled by bandwidth, estimates the others,
and each figure says whether it was measured or estimated, and from what. Figures are for an
8B-class model in bf16 (Llama-3.1-8B) at about 50 concurrent requests of about 600 output tokens,
which is the shape of the consolidation tutorial's traffic; other sizes scale with the inverse of
the parameter count (also an estimate). Measure your own with ``vllm bench serve`` and pass
``--throughput`` when it matters.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdk_adapters.hosting.instance_types import GpuInstanceType

REFERENCE_PARAMETERS = 8.03e9
"""Llama-3.1-8B's parameter count: the size class the table's figures are for."""

_A40_MEASURED = 1016.6
"""Output tokens/s, Llama-3.1-8B-Instruct bf16 on one A40 with vLLM, 50 concurrent requests, 100 in /
600 out tokens: databasemart.com, 'A40 vLLM Benchmark: 7B to 14B LLMs Under 50 & 100 Concurrent Requests'."""
_A40_BANDWIDTH_GBPS = 696.0
"""NVIDIA A40 memory bandwidth (NVIDIA A40 datasheet)."""

_BANDWIDTH_SOURCE = "bandwidths from the public GPU table at genai4a11.github.io/concepts/hardware.html"


@dataclass(frozen=True)
class GpuThroughput:
    gpu_model: str
    tokens_per_second: float
    """Per GPU, 8B-class model."""
    estimate: bool
    basis: str


def _scaled(gpu_model: str, bandwidth_gbps: float, bandwidth_source: str) -> GpuThroughput:
    value = round(_A40_MEASURED * bandwidth_gbps / _A40_BANDWIDTH_GBPS)
    return GpuThroughput(
        gpu_model,
        value,
        estimate=True,
        basis=(
            f"estimate: measured A40 figure ({_A40_MEASURED:g} tokens/s, databasemart.com A40 vLLM benchmark) x "
            f"{bandwidth_gbps:g}/{_A40_BANDWIDTH_GBPS:g} GB/s memory bandwidth ({bandwidth_source})"
        ),
    )


GPU_THROUGHPUT: dict[str, GpuThroughput] = {
    row.gpu_model: row
    for row in (
        _scaled("L4", 300, _BANDWIDTH_SOURCE),
        _scaled("A10G", 600, _BANDWIDTH_SOURCE),
        _scaled("L40S", 864, _BANDWIDTH_SOURCE),
        _scaled("A100", 1555, "A100 40 GB SXM, NVIDIA A100 datasheet"),
        _scaled("H100", 3350, _BANDWIDTH_SOURCE),
    )
}
"""Output tokens/s per GPU for an 8B-class model; all are bandwidth-scaled estimates of one measurement."""

MULTI_GPU_EFFICIENCY = {"PCIe": 0.7, "NVLink": 0.9}
"""Share of linear scaling kept across GPUs of one instance. PCIe: 61-74% measured from 1 to 4 GPUs
(e2enetworks.com, 'NVIDIA A30 vs V100 for LLM inference'); NVLink (p4d, p5): an estimate."""
_NVLINK_GPUS = frozenset({"A100", "H100"})


@dataclass(frozen=True)
class InstanceThroughput:
    instance_type: str
    tokens_per_second: float
    estimate: bool
    basis: str


def instance_throughput(instance: GpuInstanceType, parameters: float | None = None) -> InstanceThroughput:
    """Sustained output tokens/s of one `instance` serving a model of `parameters` (default 8B class)."""
    per_gpu = GPU_THROUGHPUT[instance.gpu_model]
    value = per_gpu.tokens_per_second
    basis = [f"{per_gpu.gpu_model}: {per_gpu.basis}"]
    if instance.gpu_count > 1:
        link = "NVLink" if instance.gpu_model in _NVLINK_GPUS else "PCIe"
        efficiency = MULTI_GPU_EFFICIENCY[link]
        value *= instance.gpu_count * efficiency
        basis.append(f"x {instance.gpu_count} GPUs x {efficiency:g} ({link} scaling)")
    if parameters is not None and parameters > 0:
        value *= REFERENCE_PARAMETERS / parameters
        basis.append(f"x {REFERENCE_PARAMETERS / 1e9:.2f}B/{parameters / 1e9:.2f}B parameters (estimate)")
    return InstanceThroughput(instance.name, round(value, 1), estimate=True, basis="; ".join(basis))


def given_throughput(instance_type: str, tokens_per_second: float) -> InstanceThroughput:
    """A figure the user measured (``--throughput``)."""
    return InstanceThroughput(instance_type, tokens_per_second, estimate=False, basis="--throughput (your measurement)")


__all__ = [
    "GPU_THROUGHPUT",
    "MULTI_GPU_EFFICIENCY",
    "REFERENCE_PARAMETERS",
    "GpuThroughput",
    "InstanceThroughput",
    "given_throughput",
    "instance_throughput",
]
