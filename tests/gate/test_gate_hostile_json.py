"""A hostile adapter_config.json or safetensors header is a gate problem, never an exception: the
container runs the gate on every ``POST /adapters``, where an exception would be a 500."""

from __future__ import annotations

import struct

import pytest

from cdk_adapters.gate import Reference, check_adapter_dir

HOSTILE = {
    "nested far past the recursion limit": b"[" * 200_000 + b"]" * 200_000,
    "a 5000-digit number": b'{"r": ' + b"9" * 5000 + b"}",
}


@pytest.mark.parametrize("content", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_adapter_config_is_a_problem(zoo, tmp_path, content):
    adapter = zoo.copy("good", tmp_path / "adapter")
    (adapter / "adapter_config.json").write_bytes(content)
    problems = check_adapter_dir("tenant-v1", adapter, Reference(zoo.base_facts, 16))
    assert [(p.field, p.rule) for p in problems] == [("adapter_config.json", "adapter-config")]
    assert problems[0].message.startswith("adapter_config.json ")


@pytest.mark.parametrize(
    "header", [*HOSTILE.values(), b'{"__metadata__": [1, 2]}'], ids=[*HOSTILE.keys(), "metadata that is a list"]
)
def test_a_hostile_safetensors_header_is_a_problem(zoo, tmp_path, header):
    adapter = zoo.copy("good", tmp_path / "adapter")
    (adapter / "adapter_model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    problems = check_adapter_dir("tenant-v1", adapter, Reference(zoo.base_facts, 16))
    assert ("adapter_model.safetensors", "weights-file") in [(p.field, p.rule) for p in problems]
    assert any("this is not a safetensors file" in p.message for p in problems)
