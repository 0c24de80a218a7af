"""What an adapter directory or archive holds, read once and shared by every check.

Only small things are read: the file list, `adapter_config.json`, and the safetensors header of
`adapter_model.safetensors`. An archive is read in place (no extraction), so a hostile archive
with absolute paths or links cannot write anywhere. A directory is listed with `lstat`, never
following a link: a link is recorded (the `linked-files` rule refuses it), never read.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any, TypedDict, Unpack

from cdk_adapters.gate.safetensors_header import (
    SafetensorsHeader,
    SafetensorsHeaderError,
    read_safetensors_header,
)

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
PICKLED_WEIGHTS = ("adapter_model.bin", "adapter_model.pt", "adapter_model.pth")
TOKENIZER_FILES = (
    "added_tokens.json",
    "chat_template.jinja",
    "merges.txt",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer.model",
    "tokenizer_config.json",
    "vocab.json",
)
"""Files a PEFT run may save beside an adapter for a resized vocabulary; packaged only on request."""

MAX_CONFIG_BYTES = 1024 * 1024
MAX_ENTRIES = 10_000
"""Files and folders read from a directory or archive before giving up: an adapter holds a few
(a PEFT output folder with checkpoints a few hundred), so a walk of ``/`` stops here."""


class _ReadExtras(TypedDict, total=False):
    """The `AdapterContents` fields only one origin sets, passed through `AdapterContents._read`."""

    archive_size: int | None
    unsafe_members: tuple[tuple[str, str], ...]
    links: dict[str, str]
    complete: bool


@dataclass(frozen=True)
class AdapterContents:
    """A snapshot of an adapter's files, as a directory or as a ``.tar.gz`` archive.

    `root` is where `adapter_config.json` was found relative to the top (``""`` when it sits at
    the top, as SageMaker and vLLM need); the config and weights are read from there either way
    so that one run reports every problem.
    """

    origin: str
    location: str
    files: dict[str, int]
    root: str = ""
    config: dict[str, Any] | None = None
    config_error: str | None = None
    weights_header: SafetensorsHeader | None = None
    weights_size: int | None = None
    weights_error: str | None = None
    archive_size: int | None = None
    unsafe_members: tuple[tuple[str, str], ...] = field(default=())
    """Archive members that cannot be extracted safely: (member name, what it is)."""
    links: dict[str, str] = field(default_factory=dict)
    """A directory's symbolic links (relative path: where the link points); never followed."""
    complete: bool = True
    """False when there were more than `MAX_ENTRIES` files, folders or members to read."""

    @property
    def is_archive(self) -> bool:
        return self.origin == "archive"

    def root_file(self, name: str) -> str:
        return str(PurePosixPath(self.root, name)) if self.root else name

    def has_root_file(self, name: str) -> bool:
        return self.root_file(name) in self.files

    @classmethod
    def from_dir(cls, path: Path | str) -> AdapterContents:
        path = Path(path)
        if not path.is_dir():
            return cls(origin="directory", location=str(path), files={}, config_error=f"{path} is not a directory")
        listing = list_directory(path)
        root = _find_root(listing.files)

        def open_file(relative: str) -> IO[bytes]:
            return open_regular_file(path / relative)

        return cls._read(
            origin="directory",
            location=str(path),
            files=listing.files,
            root=root,
            open_file=open_file,
            links=listing.links,
            complete=listing.complete,
        )

    @classmethod
    def from_archive(cls, path: Path | str) -> AdapterContents:
        path = Path(path)
        archive_size = path.stat().st_size if path.is_file() else None
        try:
            tar = tarfile.open(path, "r:gz")  # noqa: SIM115 - closed by the `with tar:` below, once opening succeeded
        except (OSError, tarfile.TarError) as error:
            return cls(
                origin="archive",
                location=str(path),
                files={},
                archive_size=archive_size,
                config_error=f"cannot be read as a .tar.gz archive ({error})",
            )
        with tar:
            files: dict[str, int] = {}
            members: dict[str, tarfile.TarInfo] = {}
            unsafe: list[tuple[str, str]] = []
            complete, damaged = True, None
            try:
                listed = list(itertools.islice(tar, MAX_ENTRIES + 1))
            except (OSError, EOFError, tarfile.TarError, zlib.error) as error:  # truncated or corrupt
                listed, damaged = [], f"cannot be read as a .tar.gz archive ({error})"
            if damaged is not None:
                return cls(origin="archive", location=str(path), files={}, archive_size=archive_size, config_error=damaged)
            if len(listed) > MAX_ENTRIES:
                listed, complete = listed[:MAX_ENTRIES], False
            for member in listed:
                name = _normalise_member_name(member.name)
                if name is None:
                    unsafe.append((member.name, "a path outside the archive"))
                    continue
                if member.issym():
                    unsafe.append((member.name, f"a symbolic link to '{member.linkname}'"))
                    continue
                if member.islnk():
                    unsafe.append((member.name, f"a hard link to '{member.linkname}'"))
                    continue
                if not (member.isfile() or member.isdir()):
                    unsafe.append((member.name, "a device, a pipe or another special file"))
                    continue
                if member.isfile():
                    files[name] = member.size
                    members[name] = member
            root = _find_root(files)

            def open_file(relative: str) -> IO[bytes]:
                stream = tar.extractfile(members[relative])
                if stream is None:
                    raise OSError(f"{relative} is not a regular file")
                return stream

            return cls._read(
                origin="archive",
                location=str(path),
                files=files,
                root=root,
                open_file=open_file,
                archive_size=archive_size,
                unsafe_members=tuple(unsafe),
                complete=complete,
            )

    @classmethod
    def _read(
        cls,
        *,
        origin: str,
        location: str,
        files: dict[str, int],
        root: str,
        open_file: Callable[[str], IO[bytes]],
        **extra: Unpack[_ReadExtras],
    ) -> AdapterContents:
        def rooted(name: str) -> str:
            return str(PurePosixPath(root, name)) if root else name

        config = config_error = None
        config_name = rooted(ADAPTER_CONFIG)
        if config_name in extra.get("links", {}):
            config_error = f"{ADAPTER_CONFIG} is a symbolic link, which is never followed; copy the file itself"
        elif config_name not in files:
            config_error = f"{ADAPTER_CONFIG} is missing"
        elif files[config_name] > MAX_CONFIG_BYTES:
            config_error = f"{ADAPTER_CONFIG} is {files[config_name]} bytes; an adapter config is a few KB"
        else:
            try:
                with open_file(config_name) as stream:
                    loaded = json.loads(stream.read().decode("utf-8"))
                if isinstance(loaded, dict):
                    config = loaded
                else:
                    config_error = f"{ADAPTER_CONFIG} is not a JSON object"
            except (UnicodeDecodeError, ValueError) as error:  # ValueError: JSONDecodeError, or a 5000-digit number
                config_error = f"{ADAPTER_CONFIG} is not valid JSON ({str(error)[:200]})"
            except RecursionError:
                config_error = f"{ADAPTER_CONFIG} nests arrays or objects too deeply to be an adapter config"

        header = weights_error = weights_size = None
        weights_name = rooted(ADAPTER_WEIGHTS)
        if weights_name in files:
            weights_size = files[weights_name]
            try:
                with open_file(weights_name) as stream:
                    header = read_safetensors_header(stream)
            except SafetensorsHeaderError as error:
                weights_error = str(error)
        return cls(
            origin=origin,
            location=location,
            files=dict(sorted(files.items())),
            root=root,
            config=config,
            config_error=config_error,
            weights_header=header,
            weights_size=weights_size,
            weights_error=weights_error,
            **extra,
        )


@dataclass(frozen=True)
class DirectoryListing:
    """A directory's regular files (relative path: size) and symbolic links (relative path: target).

    `complete` is False when the walk stopped at `MAX_ENTRIES`: such a folder is no adapter.
    """

    files: dict[str, int]
    links: dict[str, str]
    complete: bool = True


def list_directory(path: Path) -> DirectoryListing:
    """Every regular file and every link under `path`, by `lstat`: a link is listed, never followed.

    A link to a directory is not descended into. Other entries (pipes, sockets, devices) are left
    out, as nothing reads them; so are directories whose name starts with a dot (editor and tool
    state, never part of an adapter), except that such a directory which is a link is listed.
    """
    files: dict[str, int] = {}
    links: dict[str, str] = {}
    seen = 0
    for dirpath, dirnames, filenames in os.walk(path):  # os.walk never descends into a link
        for name in (*dirnames, *filenames):
            seen += 1
            if seen > MAX_ENTRIES:
                return DirectoryListing(dict(sorted(files.items())), dict(sorted(links.items())), complete=False)
            full = Path(dirpath, name)
            relative = full.relative_to(path).as_posix()
            try:
                status = os.lstat(full)
                if stat.S_ISLNK(status.st_mode):
                    links[relative] = os.readlink(full)
                elif stat.S_ISREG(status.st_mode):
                    files[relative] = status.st_size
            except OSError:  # gone since the directory was read, or a link this user may not read
                if os.path.islink(full):
                    links[relative] = "(unreadable)"
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
    return DirectoryListing(dict(sorted(files.items())), dict(sorted(links.items())))


def open_regular_file(path: Path) -> IO[bytes]:
    """Open `path` for reading, refusing a link (``O_NOFOLLOW``) or anything but a regular file.

    The listing said it was a regular file; opening without following closes the gap in which it
    could have been replaced by a link since.
    """
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def _normalise_member_name(name: str) -> str | None:
    """The member's path relative to the archive top, or None when it escapes it."""
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts:
        return None
    parts = [part for part in pure.parts if part not in ("", ".")]
    return "/".join(parts) if parts else None


def _find_root(files: dict[str, int]) -> str:
    """Where adapter_config.json lives: the top when it is there, else the shallowest copy."""
    if ADAPTER_CONFIG in files:
        return ""
    candidates = sorted(
        (name for name in files if PurePosixPath(name).name == ADAPTER_CONFIG),
        key=lambda name: (name.count("/"), name),
    )
    return str(PurePosixPath(candidates[0]).parent) if candidates else ""
