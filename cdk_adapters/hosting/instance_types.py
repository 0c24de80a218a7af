"""The GPU SageMaker instance types we support: GPUs, GPU memory, vCPUs and host memory.

The planner asks "will the base model and the LoRA slots fit on this instance?" and autoscaling
asks "will N copies fit on these instances?": both need the same facts, so they live here once,
with where each row came from. Standard-library only (no aws-cdk-lib), so commands start fast.

Memory figures are AWS's own, in GiB as AWS publishes them (an L4's "24 GiB" is its 24 GB of GDDR6;
the driver reports a little less usable memory, which the planner's utilisation factor absorbs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_INSTANCE_TYPE = "ml.g6.2xlarge"
"""The instance type an endpoint and the planner use unless told otherwise: one L4 GPU (24 GB)."""
CHECKED_ON = "2026-12-01"
"""When the rows below were last compared with their sources."""

_BATCH_GPU_JOBS = (
    "AWS Batch User Guide, 'Run a GPU job', table of supported GPU instance types "
    "(docs.aws.amazon.com/batch/latest/userguide/gpu-jobs.html)"
)
_G6E = (
    "GPUs, vCPUs and memory per size: torchx's named_resources_aws.py (meta-pytorch/torchx PR #969, 'add aws_g6e "
    "instances'); 48 GB per L40S: NVIDIA's L40S specification as quoted in public GPU tables"
)
_P4D = (
    "8 x A100 40 GB: public 'AWS GPU instances' table (gist shashankprasanna/10ebe6dc...); 96 vCPUs and "
    "1,152 GiB: Amazon EC2 P4 instance page (aws.amazon.com/ec2/instance-types/p4/), not re-read offline"
)
_P5 = (
    "Amazon EC2 P5 instance page (aws.amazon.com/ec2/instance-types/p5/): 8 x H100 80 GB, 192 vCPUs, 2 TiB; "
    "not re-read offline (H100 80 GB also in public GPU spec tables)"
)


@dataclass(frozen=True)
class GpuInstanceType:
    """One SageMaker instance type with NVIDIA GPUs."""

    name: str
    """SageMaker's name, e.g. ``ml.g6.2xlarge``."""
    gpu_count: int
    gpu_model: str
    """NVIDIA's product name: ``A10G``, ``L4``, ``L40S``, ``A100``, ``H100``."""
    gpu_memory_gib: float
    """Memory of one GPU."""
    vcpus: int
    host_memory_gib: float
    source: str
    checked_on: str = CHECKED_ON

    @property
    def total_gpu_memory_gib(self) -> float:
        return self.gpu_count * self.gpu_memory_gib


class UnknownInstanceType(ValueError):
    """An instance type that is not in `INSTANCE_TYPES` (a typo, or a family we do not support)."""

    def __init__(self, name: str) -> None:
        families = sorted({row.name.split(".")[1] for row in INSTANCE_TYPES.values()})
        super().__init__(
            f"{name!r} is not a GPU instance type this library knows; supported families: "
            f"{', '.join(families)} (e.g. ml.g6.2xlarge). See cdk_adapters/hosting/instance_types.py"
        )
        self.name = name


def _family(
    family: str, gpu_model: str, gpu_memory_gib: float, source: str, sizes: Sequence[tuple[str, int, int, float]]
) -> list[GpuInstanceType]:
    return [
        GpuInstanceType(f"ml.{family}.{size}", gpus, gpu_model, gpu_memory_gib, vcpus, host, source)
        for size, gpus, vcpus, host in sizes
    ]


_SINGLE_AND_MULTI_GPU_SIZES = [
    # size, GPUs, vCPUs, host memory GiB: the same for g5 and g6 (AWS Batch's table).
    ("xlarge", 1, 4, 16),
    ("2xlarge", 1, 8, 32),
    ("4xlarge", 1, 16, 64),
    ("8xlarge", 1, 32, 128),
    ("16xlarge", 1, 64, 256),
    ("12xlarge", 4, 48, 192),
    ("24xlarge", 4, 96, 384),
    ("48xlarge", 8, 192, 768),
]

_ROWS = (
    _family("g5", "A10G", 24, _BATCH_GPU_JOBS, _SINGLE_AND_MULTI_GPU_SIZES)
    + _family("g6", "L4", 24, _BATCH_GPU_JOBS, _SINGLE_AND_MULTI_GPU_SIZES)
    + _family(
        "g6e",
        "L40S",
        48,
        _G6E,
        [
            ("xlarge", 1, 4, 32),
            ("2xlarge", 1, 8, 64),
            ("4xlarge", 1, 16, 128),
            ("8xlarge", 1, 32, 256),
            ("16xlarge", 1, 64, 512),
            ("12xlarge", 4, 48, 384),
            ("24xlarge", 4, 96, 768),
            ("48xlarge", 8, 192, 1536),
        ],
    )
    + _family("p4d", "A100", 40, _P4D, [("24xlarge", 8, 96, 1152)])
    + _family("p5", "H100", 80, _P5, [("48xlarge", 8, 192, 2048)])
)

INSTANCE_TYPES: dict[str, GpuInstanceType] = {row.name: row for row in _ROWS}
"""Every supported GPU instance type by SageMaker name."""


def instance_type(name: str) -> GpuInstanceType | None:
    """The row for `name` (``ml.g6.2xlarge``), or None when we do not know it."""
    return INSTANCE_TYPES.get(name)


def require_instance_type(name: str) -> GpuInstanceType:
    """The row for `name`; raises `UnknownInstanceType` (a ValueError) naming the supported families."""
    row = INSTANCE_TYPES.get(name)
    if row is None:
        raise UnknownInstanceType(name)
    return row


__all__ = [
    "CHECKED_ON",
    "DEFAULT_INSTANCE_TYPE",
    "INSTANCE_TYPES",
    "GpuInstanceType",
    "UnknownInstanceType",
    "instance_type",
    "require_instance_type",
]
