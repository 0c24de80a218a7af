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


def content_digest(src: Path, recorded: Registration | None = None) -> tuple[str, str | None]:
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


def copy_admitted(src: Path, destination: Path) -> tuple[str, str | None]:
    """Copy every file under `src` into `destination` (a new directory), hashing what is copied:
    (`adapter_digest` of the copy, `stat_fingerprint` of `src` taken before reading).

    What vLLM loads is this private copy, so files changed under `src` after registration can never
    change what is served. A file that grows while it is copied is cut at the size the listing
    saw, and the fingerprint is then None (the next look reads `src` again). Files end read-only.
    """
    src, destination = Path(src), Path(destination)
    before = stat_fingerprint(src)
    listing = list_directory(src)
    if listing.links or not listing.complete:
        raise DigestRefused(f"{src} holds symbolic links or too many entries")
    destination.mkdir(mode=0o700)
    digest = hashlib.sha256()
    for relative_name, size in listing.files.items():
        relative = relative_name.encode()
        digest.update(len(relative).to_bytes(8, "little") + relative)
        digest.update(size.to_bytes(8, "little"))
        target = destination / relative_name
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        left = size
        with open_regular_file(src / relative_name) as stream, open(target, "xb") as out:
            while left > 0 and (chunk := stream.read(min(_CHUNK, left))):
                digest.update(chunk)
                out.write(chunk)
                left -= len(chunk)
        if left:
            raise DigestRefused(f"{src / relative_name} shrank while it was copied")
        os.chmod(target, 0o444)
    for folder in sorted((p for p in destination.rglob("*") if p.is_dir()), reverse=True):
        os.chmod(folder, 0o555)
    os.chmod(destination, 0o555)
    return digest.hexdigest(), before if before is not None and stat_fingerprint(src) == before else None


def remove_copy(path: Path) -> None:
    """Delete a private copy made by `copy_admitted` (its folders are read-only)."""
    path = Path(path)
    if not path.exists():
        return
    for folder in [path, *(p for p in path.rglob("*") if p.is_dir())]:
        os.chmod(folder, 0o700)
    for item in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        item.rmdir() if item.is_dir() else item.unlink()
    path.rmdir()


@dataclass(frozen=True)
class Registration:
    """One adapter as SageMaker registered it."""

    name: str
    src: str
    sha256: str
    registered_at: float
    fingerprint: str | None = None
    """`stat_fingerprint` of `src` when the digest was taken (None: unknown, read the bytes again)."""
    known_as: tuple[str, ...] = ()
    """Other adapter keys that name this registration (the alias header's, when it differs)."""
    served_from: str | None = None
    """The private, read-only copy of the admitted files vLLM loads (None: not copied yet)."""


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
        self._known_as: dict[str, str] = {}
        """Other keys of a registration (`Registration.known_as`) -> its name."""
        for registration in (registrations or {}).values():
            self._put(registration)

    @property
    def path(self) -> Path | None:
        return self.state_dir / STATE_FILE_NAME if self.state_dir is not None else None

    @classmethod
    def load(cls, state_dir: Path | None) -> RegistrationStore:
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
                fingerprint, served_from = entry.get("fingerprint"), entry.get("served_from")
                store._put(
                    Registration(
                        name=name,
                        src=str(entry["src"]),
                        sha256=str(entry["sha256"]),
                        registered_at=float(entry["registered_at"]),
                        fingerprint=str(fingerprint) if fingerprint is not None else None,
                        known_as=tuple(str(key) for key in entry.get("known_as", ())),
                        served_from=str(served_from) if served_from is not None else None,
                    )
                )
        except StateFileError:
            raise
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise StateFileError(f"{path}: cannot read persisted adapter registrations: {error!r}") from None
        return store

    def get(self, name: str) -> Registration | None:
        return self._registrations.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._registrations

    def resolve(self, key: str) -> str | None:
        """The registration an adapter key names: its own key, or one it is also known as."""
        if key in self._registrations:
            return key
        return self._known_as.get(key)

    def __len__(self) -> int:
        return len(self._registrations)

    def all(self) -> list[Registration]:
        """Registrations in the order they were made (replay loads them in that order)."""
        return sorted(self._registrations.values(), key=lambda r: (r.registered_at, r.name))

    def add(
        self,
        name: str,
        src: str,
        sha256: str,
        fingerprint: str | None = None,
        *,
        known_as: tuple[str, ...] = (),
        served_from: str | None = None,
    ) -> Registration:
        """Record and persist; if persisting fails, memory is left as it was and the error raised."""
        registration = Registration(
            name=name,
            src=src,
            sha256=sha256,
            registered_at=time.time(),
            fingerprint=fingerprint,
            known_as=tuple(key for key in known_as if key != name),
            served_from=served_from,
        )
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
        fields = {k: v for k, v in asdict(registration).items() if k != "name" and v is not None and v != ()}
        self._drop(registration.name)
        self._registrations[registration.name] = registration
        self._known_as.update(dict.fromkeys(registration.known_as, registration.name))
        self._members[registration.name] = f"  {json.dumps(registration.name)}: {json.dumps(fields, sort_keys=True)}"

    def _drop(self, name: str) -> None:
        dropped = self._registrations.pop(name, None)
        self._members.pop(name, None)
        for key in dropped.known_as if dropped is not None else ():
            if self._known_as.get(key) == name:
                del self._known_as[key]

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
