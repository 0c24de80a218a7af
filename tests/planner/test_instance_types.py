"""The shared instance-type table: typed rows, lookups, and a clear error for unknown types."""

from __future__ import annotations

import pytest

from cdk_adapters.hosting.instance_storage import has_local_instance_storage
from cdk_adapters.hosting.instance_types import (
    CHECKED_ON,
    INSTANCE_TYPES,
    UnknownInstanceType,
    instance_type,
    require_instance_type,
)

REQUIRED = {
    # name: (GPUs, GPU model, GiB per GPU, vCPUs, host GiB), as AWS publishes them
    "ml.g5.xlarge": (1, "A10G", 24, 4, 16),
    "ml.g6.2xlarge": (1, "L4", 24, 8, 32),
    "ml.g6e.12xlarge": (4, "L40S", 48, 48, 384),
    "ml.p4d.24xlarge": (8, "A100", 40, 96, 1152),
    "ml.p5.48xlarge": (8, "H100", 80, 192, 2048),
}


def test_required_types_are_present_with_their_published_gpu_facts_and_a_source():
    for name, facts in REQUIRED.items():
        row = require_instance_type(name)
        assert (row.gpu_count, row.gpu_model, row.gpu_memory_gib, row.vcpus, row.host_memory_gib) == facts, name
        assert row.total_gpu_memory_gib == facts[0] * facts[2]
        assert row.checked_on == CHECKED_ON and "(" in row.source  # says which document, not just "AWS"
    assert require_instance_type("ml.p5.48xlarge").total_gpu_memory_gib == 640


def test_unknown_type_is_none_or_a_clear_error():
    assert instance_type("ml.g9.huge") is None
    with pytest.raises(UnknownInstanceType, match=r"'ml\.g9\.huge' is not a GPU instance type.*g6e"):
        require_instance_type("ml.g9.huge")


def test_rows_are_frozen():
    row = require_instance_type("ml.g5.xlarge")
    with pytest.raises(AttributeError):
        row.gpu_count = 2  # type: ignore[misc]


def test_every_supported_type_has_local_storage_as_instance_storage_says():
    """The two tables agree: every GPU family here is one SageMaker refuses a KMS key for."""
    assert all(has_local_instance_storage(name) for name in INSTANCE_TYPES)
