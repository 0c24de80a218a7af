"""Content digests and the persisted registration file behind idempotency and replay."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from adapter_server.registrations import STATE_FILE_NAME, RegistrationStore, StateFileError, adapter_digest


def test_digest_depends_on_content_only(zoo, tmp_path):
    original = zoo.adapter("good")
    elsewhere = shutil.copytree(original, tmp_path / "extracted" / "somewhere-else")
    os.utime(elsewhere / "adapter_config.json", (0, 0))
    assert adapter_digest(elsewhere) == adapter_digest(original)

    assert adapter_digest(zoo.adapter("good-2")) != adapter_digest(original)

    one_byte = shutil.copytree(original, tmp_path / "one-byte")
    weights = one_byte / "adapter_model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01
    weights.write_bytes(bytes(data))
    assert adapter_digest(one_byte) != adapter_digest(original)

    renamed = shutil.copytree(original, tmp_path / "renamed")
    (renamed / "README.md").rename(renamed / "NOTES.md")
    assert adapter_digest(renamed) != adapter_digest(original)


def test_registrations_persist_in_order_and_reload(tmp_path):
    store = RegistrationStore.load(tmp_path / "state")
    assert store.all() == []
    first = store.add("tenant-a-v1", "/opt/ml/a", "a" * 64)
    second = store.add("tenant-b-v1", "/opt/ml/b", "b" * 64)

    reloaded = RegistrationStore.load(tmp_path / "state")
    assert reloaded.all() == [first, second]
    assert "tenant-a-v1" in reloaded and reloaded.get("tenant-b-v1").src == "/opt/ml/b"

    reloaded.remove("tenant-a-v1")
    assert [r.name for r in RegistrationStore.load(tmp_path / "state").all()] == ["tenant-b-v1"]
    # Written by rename: no temporary files are left beside the state file.
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == [STATE_FILE_NAME]


def test_memory_only_store_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = RegistrationStore.load(None)
    store.add("tenant-a-v1", "/opt/ml/a", "a" * 64)
    assert store.path is None and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "content, words",
    [
        ("{not json", "cannot read persisted adapter registrations"),
        (json.dumps({"version": 99, "adapters": {}}), "unsupported format version 99"),
        (json.dumps({"version": 1, "adapters": {"a": {"src": "/x"}}}), "cannot read persisted adapter registrations"),
    ],
)
def test_unreadable_state_is_an_error_naming_the_file(tmp_path, content, words):
    (tmp_path / STATE_FILE_NAME).write_text(content)
    with pytest.raises(StateFileError) as raised:
        RegistrationStore.load(tmp_path)
    assert str(tmp_path / STATE_FILE_NAME) in str(raised.value) and words in str(raised.value)


def test_a_failed_write_leaves_memory_as_it_was(tmp_path):
    store = RegistrationStore.load(tmp_path / "state")
    kept = store.add("tenant-a-v1", "/opt/ml/a", "a" * 64)
    (tmp_path / "state" / STATE_FILE_NAME).unlink()
    (tmp_path / "state" / STATE_FILE_NAME).mkdir()  # renaming the new file onto it fails
    with pytest.raises(OSError):
        store.add("tenant-b-v1", "/opt/ml/b", "b" * 64)
    with pytest.raises(OSError):
        store.remove("tenant-a-v1")
    assert store.all() == [kept]
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == [STATE_FILE_NAME]  # no temporary left
