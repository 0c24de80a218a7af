"""The example app's manifest and lock pass the gate offline, and the lock is byte-stable."""

from __future__ import annotations

from pathlib import Path

from cdk_adapters.manifest import load_manifest, plan_manifest, write_lock

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "example.yaml"


def test_example_manifest_passes_the_gate():
    plan = plan_manifest(load_manifest(EXAMPLE))
    assert [a.name for a in plan.adapters] == ["support-en-v1", "support-de-v1"]
    assert all(a.lock_entry is not None for a in plan.adapters)
    assert (plan.max_loras, plan.max_cpu_loras, plan.max_lora_rank) == (4, 8, 16)


def test_example_lock_is_written_canonically(tmp_path):
    loaded = load_manifest(EXAMPLE)
    write_lock(tmp_path / "rewritten.json", loaded.lock)
    assert (tmp_path / "rewritten.json").read_text() == loaded.lock_path.read_text()
