"""Deterministic packaging: same adapter files -> same archive bytes, on any machine, at any time."""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import time

import pytest

from cdk_adapters.artifacts.packaging import archive_listing, gzip_header_mtime, package_adapter


def test_same_directory_twice_gives_identical_bytes(zoo, tmp_path, snapshot):
    first = package_adapter(zoo.adapter("good"), tmp_path / "first.tar.gz")
    second = package_adapter(zoo.adapter("good"), tmp_path / "second.tar.gz")
    assert first.path.read_bytes() == second.path.read_bytes()
    assert first.sha256 == second.sha256
    assert {"listing": archive_listing(first.path), "sha256": first.sha256, "size": first.size} == snapshot


def test_copy_with_other_mtimes_permissions_and_extra_files_gives_identical_bytes(zoo, tmp_path):
    copy = shutil.copytree(zoo.adapter("good"), tmp_path / "elsewhere" / "renamed-dir")
    old = time.time() - 86_400 * 400
    for path in copy.iterdir():
        os.utime(path, (old, old))
        path.chmod(0o600)
    (copy / "optimizer.pt").write_bytes(os.urandom(1000))
    (copy / "checkpoint-10").mkdir()
    (copy / "checkpoint-10" / "adapter_model.safetensors").write_bytes(b"stale")
    original = package_adapter(zoo.adapter("good"), tmp_path / "a.tar.gz")
    moved = package_adapter(copy, tmp_path / "b.tar.gz")
    assert original.path.read_bytes() == moved.path.read_bytes()


def test_archive_fields_are_fixed_and_files_sit_at_the_root(zoo, tmp_path):
    packaged = package_adapter(zoo.adapter("good"), tmp_path / "a.tar.gz")
    assert gzip_header_mtime(packaged.path) == 0
    assert packaged.path.read_bytes()[3] & 0x08 == 0  # FNAME flag: no file name in the gzip header
    listing = archive_listing(packaged.path)
    assert [m["name"] for m in listing] == ["adapter_config.json", "adapter_model.safetensors"]
    assert {(m["mode"], m["mtime"], m["uid"], m["gid"], m["uname"], m["gname"]) for m in listing} == {("0o644", 0, 0, 0, "", "")}
    with tarfile.open(packaged.path) as tar:
        extracted = tar.extractfile("adapter_model.safetensors").read()
    assert extracted == (zoo.adapter("good") / "adapter_model.safetensors").read_bytes()


def test_tokenizer_files_only_when_asked(zoo, tmp_path):
    adapter = shutil.copytree(zoo.adapter("good"), tmp_path / "with-tokenizer")
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(zoo.base_dir / name, adapter / name)
    plain = package_adapter(adapter, tmp_path / "plain.tar.gz")
    with_tokenizer = package_adapter(adapter, tmp_path / "tok.tar.gz", include_tokenizer=True)
    assert plain.members == ("adapter_config.json", "adapter_model.safetensors")
    assert with_tokenizer.members == (
        "adapter_config.json",
        "adapter_model.safetensors",
        "chat_template.jinja",
        "tokenizer.json",
        "tokenizer_config.json",
    )


def test_changed_weights_change_the_hash(zoo, tmp_path):
    a = package_adapter(zoo.adapter("good"), tmp_path / "a.tar.gz")
    b = package_adapter(zoo.adapter("good-2"), tmp_path / "b.tar.gz")
    assert a.sha256 != b.sha256


def test_missing_weights_leave_no_archive_behind(zoo, tmp_path):
    adapter = shutil.copytree(zoo.adapter("good"), tmp_path / "broken")
    (adapter / "adapter_model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=re.escape("lacks adapter_model.safetensors")):
        package_adapter(adapter, tmp_path / "out" / "a.tar.gz")
    assert not (tmp_path / "out").exists()


def test_the_archive_file_gets_a_plain_files_mode_not_mkstemps_0600(zoo, tmp_path):
    """CDK stages the archive as an asset and users share it: 0600 left it readable by its owner only."""
    previous = os.umask(0o022)
    try:
        packaged = package_adapter(zoo.adapter("good"), tmp_path / "a.tar.gz")
    finally:
        os.umask(previous)
    assert packaged.path.stat().st_mode & 0o777 == 0o644
