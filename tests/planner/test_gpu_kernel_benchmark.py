"""The GPU re-measure benchmark skips cleanly where vLLM's CUDA kernels are absent (every CI machine)."""

from __future__ import annotations

import pytest

from benchmarks import bench_gpu_lora_kernels


def test_it_skips_without_cuda_and_exits_zero(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the benchmark measures instead of skipping")
    assert bench_gpu_lora_kernels.main([]) == 0
    assert capsys.readouterr().out.startswith("skipped: no CUDA device")


def test_it_measures_the_planner_tables_cases():
    from cdk_adapters.planner import lora_kernels

    planner_points = set(lora_kernels.ALL_LINEAR_RANK16) | set(lora_kernels.PADDED_RANK)
    assert planner_points == set(bench_gpu_lora_kernels.CASES), "every point of the planner's table is re-measured, no other"
