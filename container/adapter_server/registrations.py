"""Adapter registrations: content digests, and a small file that outlives the engine.

SageMaker registers each adapter once, when its inference component is created. If the vLLM
process restarts in place (AWS's supervisor does that after an engine crash), vLLM comes back
with no adapters and SageMaker is not known to register them again. Persisting what was
registered, and under which content digest, lets the middleware replay the registrations and
answer retries idempotently (same name and same files: 200; same name, other files: 409).

Replay is the readiness of a restarted engine, so at fleet size it must not read every adapter's
weights again: each registration also records a *stat fingerprint* of its files (names, sizes,
modification and change times, inodes: `lstat` only, no bytes read). When the files still have it,
the recorded digest stands; any write, re-extraction or touch changes the change time (which no
user can set back), and the bytes are hashed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from cdk_adapters.gate.adapter_contents import list_directory, open_regular_file

STATE_FILE_NAME = "registrations.json"
_FORMAT_VERSION = 1
_CHUNK = 1024 * 1024


class DigestRefused(ValueError):
    """The directory holds links (never followed) or far too many entries to be an adapter."""


def stat_fingerprint(src: Path) -> str | None:
    """A digest of what `lstat` says about every file under `src` (reads no file's bytes).

    None when the directory holds links or too many entries (the content digest refuses those).
    """
    src = Path(src)
    listing = list_directory(src)
    if listing.links or not listing.complete:
        return None
    digest = hashlib.sha256()
    for relative_name in listing.files:
        status = os.lstat(src / relative_name)
        facts = (relative_name, status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino, status.st_dev)
        digest.update(repr(facts).encode() + b"\n")
    return digest.hexdigest()


def content_digest(src: Path, recorded: "Registration | None" = None) -> tuple[str, str | None]:
    """(`adapter_digest`, `stat_fingerprint`) of `src`; the bytes are read only when `recorded`
    does not match the files' fingerprint now.

    The fingerprint is taken before and after reading the bytes; a file that changed meanwhile
    leaves it None, so the next look reads the bytes again.
    """
    before = stat_fingerprint(src)
    if recorded is not None and recorded.fingerprint is not None and before == recorded.fingerprint:
        return recorded.sha256, before
    digest = adapter_digest(src)
    return digest, before if before is not None and stat_fingerprint(src) == before else None


def adapter_digest(src: Path) -> str:
    """SHA-256 over every regular file's relative path and bytes, in a fixed order.

    Depends only on content: where the archive was extracted and the files' timestamps do not
    change it, so a retried registration of the same archive matches. Lists the files as the gate
    does (`list_directory`: by lstat, hidden folders left out), and refuses a link rather than
    hashing what it points at.
    """
    src = Path(src)
    listing = list_directory(src)
    if listing.links or not listing.complete:
        found = ", ".join(f"{name} -> {target}" for name, target in listing.links.items())
        raise DigestRefused(f"{src} holds symbolic links ({found})" if found else f"{src} holds too many entries")
    digest = hashlib.sha256()
    for relative_name, size in listing.files.items():
        relative = relative_name.encode()
        digest.update(len(relative).to_bytes(8, "little") + relative)
        digest.update(size.to_bytes(8, "little"))
        with open_regular_file(src / relative_name) as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class Registration:
    """One adapter as SageMaker registered it."""

    name: str
    src: str
    sha256: str
    registered_at: float
    fingerprint: str | None = None
    """`stat_fingerprint` of `src` when the digest was taken (None: unknown, read the bytes again)."""


class StateFileError(ValueError):
    """The persisted registrations cannot be read; the message names the file and the fault."""


class RegistrationStore:
    """Registrations by name, written through to ``<state_dir>/registrations.json`` atomically.

    With no `state_dir` the store lives in memory only, for runs that cannot restart in place.
    Each write is the whole file (write, fsync, rename): each entry is serialised once, when it is
    added, and kept beside it, so a write costs one join of the kept text, the file's bytes and
    one fsync - no Python-level pass over the other registrations.
    """

    def __init__(self, state_dir: Path | None, registrations: dict[str, Registration] | None = None) -> None:
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self._registrations: dict[str, Registration] = {}
        self._members: dict[str, str] = {}
        """Each registration's JSON member (one line of the file), by name, in step with `_registrations`."""
        for registration in (registrations or {}).values():
            self._put(registration)

    @property
    def path(self) -> Path | None:
        return self.state_dir / STATE_FILE_NAME if self.state_dir is not None else None

    @classmethod
    def load(cls, state_dir: Path | None) -> "RegistrationStore":
        """Read the persisted registrations (none yet is fine; an unreadable file is not)."""
        store = cls(state_dir)
        path = store.path
        if path is None or not path.exists():
            return store
        try:
            document = json.loads(path.read_text())
            if document.get("version") != _FORMAT_VERSION:
                raise StateFileError(f"{path}: unsupported format version {document.get('version')!r}")
            for name, entry in document["adapters"].items():
                fingerprint = entry.get("fingerprint")
                store._put(Registration(
                    name=name, src=str(entry["src"]), sha256=str(entry["sha256"]),
                    registered_at=float(entry["registered_at"]),
                    fingerprint=str(fingerprint) if fingerprint is not None else None,
                ))
        except StateFileError:
            raise
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise StateFileError(f"{path}: cannot read persisted adapter registrations: {error!r}") from None
        return store

    def get(self, name: str) -> Registration | None:
        return self._registrations.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._registrations

    def __len__(self) -> int:
        return len(self._registrations)

    def all(self) -> list[Registration]:
        """Registrations in the order they were made (replay loads them in that order)."""
        return sorted(self._registrations.values(), key=lambda r: (r.registered_at, r.name))

    def add(self, name: str, src: str, sha256: str, fingerprint: str | None = None) -> Registration:
        """Record and persist; if persisting fails, memory is left as it was and the error raised."""
        registration = Registration(name=name, src=src, sha256=sha256, registered_at=time.time(), fingerprint=fingerprint)
        previous = self._registrations.get(name)
        self._put(registration)
        self._write_or_restore(name, previous)
        return registration

    def remove(self, name: str) -> None:
        """Forget and persist; if persisting fails, the registration stays (in memory and on disk)."""
        previous = self._registrations.get(name)
        if previous is not None:
            self._drop(name)
            self._write_or_restore(name, previous)

    def _write_or_restore(self, name: str, previous: Registration | None) -> None:
        # Memory must never claim what the file does not: a retry or a replay would trust it.
        try:
            self._write()
        except BaseException:
            if previous is None:
                self._drop(name)
            else:
                self._put(previous)
            raise

    def _put(self, registration: Registration) -> None:
        """Keep `registration` and its serialised line (the one serialisation it gets)."""
        fields = {k: v for k, v in asdict(registration).items() if k != "name" and v is not None}
        self._registrations[registration.name] = registration
        self._members[registration.name] = f"  {json.dumps(registration.name)}: {json.dumps(fields, sort_keys=True)}"

    def _drop(self, name: str) -> None:
        self._registrations.pop(name, None)
        self._members.pop(name, None)

    def _document(self) -> str:
        """The file's text: ``{"version": 1, "adapters": {name: {...}, ...}}``, one adapter a line."""
        members = ",\n".join(self._members.values())
        return f'{{"version": {_FORMAT_VERSION}, "adapters": {{\n{members}\n}}}}\n'

    def _write(self) -> None:
        path = self.path
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write-then-rename: a crash mid-write leaves the previous file, never half of one.
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".registrations-", suffix=".json")
        try:
            with os.fdopen(handle, "w") as stream:
                stream.write(self._document())
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
