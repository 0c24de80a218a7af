"""Content digests and the persisted registration file behind idempotency and replay."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from adapter_server import registrations
from adapter_server.registrations import (
    STATE_FILE_NAME,
    RegistrationStore,
    StateFileError,
    adapter_digest,
    content_digest,
    stat_fingerprint,
)


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


class CountingReads:
    """Counts every file the digest opens to read bytes (the real `open_regular_file` still opens it)."""

    def __init__(self, monkeypatch) -> None:
        self.opened: list[str] = []
        real = registrations.open_regular_file

        def counting(path):
            self.opened.append(os.path.basename(path))
            return real(path)

        monkeypatch.setattr(registrations, "open_regular_file", counting)


def test_replay_does_not_read_unchanged_adapters_bytes_again(zoo, tmp_path, monkeypatch):
    adapter = shutil.copytree(zoo.adapter("good"), tmp_path / "adapter")
    reads = CountingReads(monkeypatch)
    digest, fingerprint = content_digest(adapter)
    files = sorted(reads.opened)
    assert digest == adapter_digest(adapter) and fingerprint == stat_fingerprint(adapter) and files
    store = RegistrationStore.load(tmp_path / "state")
    store.add("tenant-a-v1", str(adapter), digest, fingerprint)
    recorded = RegistrationStore.load(tmp_path / "state").get("tenant-a-v1")
    assert recorded.fingerprint == fingerprint  # persisted with the registration

    reads.opened.clear()
    assert content_digest(adapter, recorded) == (digest, fingerprint)
    assert reads.opened == []  # unchanged files: not one opened

    # Touched (same bytes, new times): read again, and the digest still holds.
    os.utime(adapter / "adapter_config.json")
    again, new_fingerprint = content_digest(adapter, recorded)
    assert (again, sorted(reads.opened)) == (digest, files) and new_fingerprint != fingerprint


def test_a_change_that_keeps_size_and_modification_time_is_still_read(zoo, tmp_path, monkeypatch):
    adapter = shutil.copytree(zoo.adapter("good"), tmp_path / "adapter")
    digest, fingerprint = content_digest(adapter)
    store = RegistrationStore(None)
    recorded = store.add("tenant-a-v1", str(adapter), digest, fingerprint)
    weights = adapter / "adapter_model.safetensors"
    before = os.stat(weights)
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))  # the change time cannot be set back
    reads = CountingReads(monkeypatch)
    changed, _ = content_digest(adapter, recorded)
    assert changed != digest and "adapter_model.safetensors" in reads.opened
    # A registration recorded without a fingerprint (an older state file) is always read.
    reads.opened.clear()
    legacy = registrations.Registration("tenant-a-v1", str(adapter), digest, 0.0)
    content_digest(adapter, legacy)
    assert reads.opened


def test_each_registration_serialises_one_entry_not_the_whole_file(tmp_path, monkeypatch):
    calls = []
    real = registrations.asdict
    monkeypatch.setattr(registrations, "asdict", lambda value: calls.append(value.name) or real(value))
    store = RegistrationStore.load(tmp_path / "state")
    for index in range(50):
        store.add(f"tenant-{index}-v1", f"/opt/ml/{index}", f"{index:064x}")
    assert len(calls) == 50  # one per registration: 1,275 if every write serialised every entry
    store.remove("tenant-7-v1")
    assert len(calls) == 50
    reloaded = RegistrationStore.load(tmp_path / "state")
    assert len(reloaded) == 49 and [r.name for r in reloaded.all()] == [r.name for r in store.all()]
    document = json.loads((tmp_path / "state" / STATE_FILE_NAME).read_text())
    assert document["version"] == 1 and document["adapters"]["tenant-3-v1"] == {
        "src": "/opt/ml/3",
        "sha256": f"{3:064x}",
        "registered_at": store.get("tenant-3-v1").registered_at,
    }


def python_calls_in_registrations_module(action) -> int:
    """Python-level calls (generator steps included) made in registrations.py while `action` runs:
    a count of the store's own work, exact and independent of the machine's speed."""
    import sys

    module_file = registrations.__file__
    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        if event == "call" and frame.f_code.co_filename == module_file:
            calls += 1

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return calls


def test_one_more_registration_costs_the_store_the_same_python_work_at_10_and_at_1000(tmp_path):
    """The file is still rewritten whole (its bytes grow with the fleet; one join and one fsync),
    but no Python-level pass over the other registrations runs per write: that pass was what made
    the middleware's own time per registration grow with the registered count."""
    counts = {}
    for size in (10, 1000):
        store = RegistrationStore.load(tmp_path / f"state-{size}")
        for index in range(size):
            store.add(f"tenant-{index}-v1", f"/opt/ml/{index}", f"{index:064x}")
        counts[size] = (
            python_calls_in_registrations_module(lambda store=store: store.add("newcomer-v1", "/opt/ml/new", "e" * 64)),
            python_calls_in_registrations_module(lambda store=store: store.remove("tenant-3-v1")),
        )
        assert len(RegistrationStore.load(tmp_path / f"state-{size}")) == size  # +1 added, -1 removed
    assert counts[10] == counts[1000], counts
