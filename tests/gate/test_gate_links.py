"""Links are refused, never followed: in adapter directories (the gate, the packager, the manifest at
synth) and as archive members. Each test plants a real link (os.symlink / a tar link member) in a
real PEFT adapter built by tests/support/tiny_models.py."""

from __future__ import annotations

import os
import re
import tarfile
from pathlib import Path

import pytest

from cdk_adapters.artifacts.packaging import LinkedFileError, package_adapter
from cdk_adapters.gate import AdapterContents, Reference, check_adapter_archive, check_adapter_dir
from cdk_adapters.gate.adapter_contents import MAX_ENTRIES
from cdk_adapters.manifest import check_manifest, load_manifest
from tests.manifest.builders import write_manifest

SECRET = b'{"model": "someone else\'s tokenizer, or a secret"}'


@pytest.fixture
def linked_adapter(zoo, tmp_path) -> tuple[Path, Path]:
    """A real adapter whose tokenizer.json is a link to a file outside its directory."""
    outside = tmp_path / "outside" / "tokenizer.json"
    outside.parent.mkdir()
    outside.write_bytes(SECRET)
    adapter = zoo.copy("good", tmp_path / "adapter")
    os.symlink(outside, adapter / "tokenizer.json")
    return adapter, outside


def test_the_gate_names_the_link_and_its_target_with_the_rule(zoo, linked_adapter):
    adapter, outside = linked_adapter
    problems = check_adapter_dir("tenant-v1", adapter, Reference(zoo.base_facts, 16))
    assert [(p.subject, p.field, p.rule) for p in problems] == [("adapter 'tenant-v1'", "source", "linked-files")]
    assert problems[0].message.startswith(f"'tokenizer.json' is a symbolic link to '{outside}'")
    assert "links are never followed" in problems[0].message
    assert str(problems[0]).endswith(" [linked-files]")


def test_the_listing_never_follows_a_link(zoo, linked_adapter, tmp_path):
    adapter, outside = linked_adapter
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "deep").mkdir(parents=True)
    (elsewhere / "deep" / "adapter_model.safetensors").write_bytes(b"not read")
    os.symlink(elsewhere, adapter / "more", target_is_directory=True)
    contents = AdapterContents.from_dir(adapter)
    assert contents.links == {"more": str(elsewhere), "tokenizer.json": str(outside)}
    assert not any(name.startswith("more/") for name in contents.files)  # never descended into
    problems = check_adapter_dir("tenant-v1", adapter, Reference(zoo.base_facts, 16))
    assert [p.message.split(";")[0] for p in problems] == [
        f"'more' is a symbolic link to '{elsewhere}'",
        f"'tokenizer.json' is a symbolic link to '{outside}'",
    ]


def test_a_linked_config_is_refused_not_read(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "adapter")
    real = tmp_path / "real_config.json"
    (adapter / "adapter_config.json").rename(real)
    os.symlink(real, adapter / "adapter_config.json")
    problems = check_adapter_dir("tenant-v1", adapter, Reference(zoo.base_facts, 16))
    assert [(p.field, p.rule) for p in problems] == [("source", "linked-files"), ("adapter_config.json", "adapter-config")]
    assert problems[1].message.startswith("adapter_config.json is a symbolic link, which is never followed")


def test_the_packager_refuses_a_link_and_writes_nothing(linked_adapter, tmp_path):
    adapter, outside = linked_adapter
    output = tmp_path / "out" / "adapter.tar.gz"
    with pytest.raises(LinkedFileError) as caught:
        package_adapter(adapter, output, include_tokenizer=True)
    assert f"tokenizer.json is a symbolic link to {outside}" in str(caught.value)
    assert "nothing was packaged" in str(caught.value)
    assert not output.parent.exists()  # not even the folder: the check comes before any write


def test_the_packager_never_follows_a_linked_weights_file(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "adapter")
    real = tmp_path / "weights.safetensors"
    (adapter / "adapter_model.safetensors").rename(real)
    os.symlink(real, adapter / "adapter_model.safetensors")
    with pytest.raises(LinkedFileError, match=re.escape("adapter_model.safetensors is a symbolic link to")):
        package_adapter(adapter, tmp_path / "adapter.tar.gz")
    assert not (tmp_path / "adapter.tar.gz").exists()


def test_the_manifest_gate_refuses_a_local_source_with_a_link(zoo, linked_adapter, tmp_path):
    adapter, outside = linked_adapter
    path = write_manifest(tmp_path, [{"name": "triage-v1", "source": str(adapter), "include_tokenizer": True}])
    problems, plan = check_manifest(load_manifest(path))
    assert plan is None
    assert [(p.subject, p.field, p.rule) for p in problems] == [("adapter 'triage-v1'", "source", "linked-files")]
    assert f"'tokenizer.json' is a symbolic link to '{outside}'" in problems[0].message


def _archive(path: Path, adapter: Path, link: tarfile.TarInfo) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name in ("adapter_config.json", "adapter_model.safetensors"):
            tar.add(adapter / name, arcname=name)
        tar.addfile(link)
    return path


@pytest.mark.parametrize(
    ("kind", "target", "described"),
    [
        (tarfile.SYMTYPE, "/etc/passwd", "a symbolic link to '/etc/passwd'"),
        (tarfile.LNKTYPE, "adapter_config.json", "a hard link to 'adapter_config.json'"),
    ],
)
def test_an_archive_with_a_link_member_is_refused(zoo, tmp_path, kind, target, described):
    link = tarfile.TarInfo("tokenizer.json")
    link.type, link.linkname = kind, target
    archive = _archive(tmp_path / "linked.tar.gz", zoo.adapter("good"), link)
    problems = check_adapter_archive("tenant-v1", archive, Reference(zoo.base_facts, 16))
    assert [(p.field, p.rule) for p in problems] == [("source", "archive-layout")]
    assert problems[0].message.startswith(f"archive member 'tokenizer.json' is {described}")


def test_a_directory_far_too_large_to_be_an_adapter_is_refused_without_reading_it_all(zoo, tmp_path):
    adapter = zoo.copy("good", tmp_path / "adapter")
    (adapter / "runs").mkdir()
    for index in range(MAX_ENTRIES + 1):
        (adapter / "runs" / f"{index}.txt").touch()
    contents = AdapterContents.from_dir(adapter)
    assert contents.complete is False and len(contents.files) < MAX_ENTRIES
    problems = check_adapter_dir("tenant-v1", adapter, Reference(zoo.base_facts, 16))
    assert [(p.field, p.rule) for p in problems] == [("source", "archive-layout")]
    assert problems[0].message.startswith(f"the directory holds more than {MAX_ENTRIES} files and folders")


def test_the_directory_itself_may_be_reached_through_a_link(zoo, tmp_path):
    """Only links inside the adapter are refused: where SageMaker (or a user) keeps the folder is theirs."""
    alias = tmp_path / "current"
    os.symlink(zoo.adapter("good"), alias, target_is_directory=True)
    assert check_adapter_dir("tenant-v1", alias, Reference(zoo.base_facts, 16)) == []
    assert AdapterContents.from_dir(alias).files == AdapterContents.from_dir(zoo.adapter("good")).files
