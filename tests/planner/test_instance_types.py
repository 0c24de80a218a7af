"""The shared instance-type table: typed rows, lookups, and a clear error for unknown types."""

from __future__ import annotations

import pytest

from cdk_adapters.instance_types import INSTANCE_TYPES, UnknownInstanceType, instance_type, require_instance_type
from cdk_adapters.instance_storage import has_local_instance_storage


def test_required_types_are_present_with_gpu_facts():
    for name in ("ml.g5.xlarge", "ml.g6.2xlarge", "ml.g6e.12xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge"):
        row = require_instance_type(name)
        assert row.gpu_count >= 1 and row.gpu_memory_gib > 0 and row.vcpus > 0 and row.host_memory_gib > 0
        assert row.source and row.checked_on
    assert require_instance_type("ml.g6.2xlarge").gpu_model == "L4"
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
