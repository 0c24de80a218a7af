"""Issue 27 point 3 (gate half): a directory is bounded like an archive, and a weights header is capped.

Big files are sparse (`os.truncate`): an "8 GiB" file costs no disk, and the gate must refuse it from
its `lstat` size without reading it.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from cdk_adapters.gate import Reference, check_adapter_dir
from cdk_adapters.gate.adapter_contents import AdapterContents
from cdk_adapters.gate.safetensors_header import MAX_HEADER_BYTES, MAX_TENSORS

GIB = 1024**3


def check(zoo, path: Path):
    return check_adapter_dir("tenant-v1", path, Reference(zoo.base_facts, 16))


def sparse(path: Path, size: int) -> Path:
    path.touch()
    os.truncate(path, size)
    return path


def test_a_directory_with_an_8_gib_extra_file_is_refused_without_reading_it(zoo, tmp_path, monkeypatch):
    adapter = zoo.copy("good", tmp_path / "big")
    sparse(adapter / "optimizer.pt", 8 * GIB)
    opened: list[str] = []
    import cdk_adapters.gate.adapter_contents as contents_module

    real_open = contents_module.open_regular_file
    monkeypatch.setattr(contents_module, "open_regular_file", lambda p: opened.append(Path(p).name) or real_open(p))
    problems = check(zoo, adapter)
    assert [(p.rule, p.field) for p in problems] == [("size-bound", "source")]
    assert f"optimizer.pt ({8 * GIB} bytes)" in problems[0].message
    assert "copy those into a new folder and use that folder as the source" in problems[0].message
    assert "optimizer.pt" not in opened


def test_a_directory_with_any_unexpected_file_is_refused_like_an_archive(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "extra")
    (adapter / "notes.txt").write_text("hello")
    (adapter / "checkpoint-10").mkdir()
    (adapter / "checkpoint-10" / "trainer_state.json").write_text("{}")
    problems = check(zoo, adapter)
    assert [(p.rule, p.field) for p in problems] == [("size-bound", "source")]
    assert "notes.txt" in problems[0].message and "checkpoint-10/trainer_state.json" in problems[0].message


def test_an_oversized_allowed_file_is_refused(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "tokenizer")
    sparse(adapter / "tokenizer.json", 8 * GIB)
    problems = check(zoo, adapter)
    assert [(p.rule, p.field) for p in problems] == [("size-bound", "source")]
    assert "tokenizer.json is 8589934592 bytes" in problems[0].message


def test_a_peft_output_directory_with_its_readme_and_tokenizer_passes(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "ok")
    (adapter / "README.md").write_text("# model card")
    (adapter / "tokenizer_config.json").write_text("{}")
    assert check(zoo, adapter) == []


def test_a_weights_file_grown_to_8_gib_is_refused(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "grown")
    os.truncate(adapter / "adapter_model.safetensors", 8 * GIB)
    problems = check(zoo, adapter)
    assert [(p.rule, p.field) for p in problems] == [("size-bound", "adapter_model.safetensors")]


def _write_header(path: Path, header: bytes) -> None:
    with open(path, "wb") as stream:
        stream.write(struct.pack("<Q", len(header)) + header)


def test_a_header_above_the_cap_is_refused_before_it_is_read(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "huge-header")
    weights = adapter / "adapter_model.safetensors"
    with open(weights, "wb") as stream:
        stream.write(struct.pack("<Q", MAX_HEADER_BYTES + 1))
    os.truncate(weights, 8 + MAX_HEADER_BYTES + 1)  # sparse: the "header" is never read
    contents = AdapterContents.from_dir(adapter)
    assert contents.weights_header is None and "above the" in contents.weights_error
    assert str(MAX_TENSORS) in contents.weights_error
    assert any(p.rule == "weights-file" for p in check(zoo, adapter))


def test_a_header_with_too_many_tensors_is_refused(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "many-tensors")
    entry = '{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'
    header = "{" + ",".join(f'"t{i}":{entry}' for i in range(MAX_TENSORS + 1)) + "}"
    assert len(header) < MAX_HEADER_BYTES  # refused for its count, not its size
    _write_header(adapter / "adapter_model.safetensors", header.encode())
    contents = AdapterContents.from_dir(adapter)
    assert contents.weights_header is None and f"{MAX_TENSORS + 1} tensors" in contents.weights_error


def test_a_tensor_with_a_huge_shape_list_is_refused(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "shape")
    header = json.dumps({"t": {"dtype": "F32", "shape": [1] * 100_000, "data_offsets": [0, 4]}})
    _write_header(adapter / "adapter_model.safetensors", header.encode())
    contents = AdapterContents.from_dir(adapter)
    assert contents.weights_header is None and "dimensions" in contents.weights_error


def test_the_tensor_cap_leaves_room_for_a_70b_all_linear_and_a_per_expert_moe_adapter():
    assert MAX_TENSORS > 80 * 7 * 2 * 50  # Llama-3-70B all-linear: 1,120 tensors, 50x margin and more
    assert MAX_TENSORS > 61 * 256 * 3 * 2  # DeepSeek-V3 per-expert LoRA: 93,696
