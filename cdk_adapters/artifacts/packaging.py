"""Deterministic adapter archives: the same adapter files always give the same bytes.

Content-addressed storage (CDK assets, the lock file's sha256) only works if packaging is a pure
function of the files' contents. So entries are sorted, and every field that would leak the build
machine or the clock is fixed: mtime 0, uid/gid 0, no user/group names, mode 0644, gzip header
mtime 0 and no file name. Files sit at the archive root, as SageMaker and vLLM expect, and only the
adapter's own files go in (plus tokenizer files when asked), never checkpoints or optimizer state.
A link is never followed: packaging one would put whatever it points at into the archive.
Standard-library only.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cdk_adapters.gate.adapter_contents import ADAPTER_CONFIG, ADAPTER_WEIGHTS, TOKENIZER_FILES, open_regular_file

FILE_MODE = 0o644
ARCHIVE_MODE = 0o666
"""The archive file's own mode before the umask: what ``open(path, "w")`` would give it."""
GZIP_LEVEL = 9
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class PackagedAdapter:
    """An archive written by `package_adapter`, with what the lock file records about it."""

    path: Path
    sha256: str
    size: int
    members: tuple[str, ...]


class LinkedFileError(ValueError):
    """A file that would be packaged is a symbolic link; the message names it and its target."""


def archive_members(adapter_dir: Path, *, include_tokenizer: bool = False) -> list[str]:
    """The file names that go into the archive, sorted; tokenizer files only where present
    (as files or as links, which `package_adapter` then refuses)."""
    adapter_dir = Path(adapter_dir)
    wanted = [ADAPTER_CONFIG, ADAPTER_WEIGHTS]
    if include_tokenizer:
        wanted += [name for name in TOKENIZER_FILES if os.path.lexists(adapter_dir / name)]
    return sorted(wanted)


def package_adapter(adapter_dir: Path, output: Path, *, include_tokenizer: bool = False) -> PackagedAdapter:
    """Write `adapter_dir`'s adapter files to `output` (``.tar.gz``) deterministically.

    Call the compatibility gate first; this only refuses what it cannot package at all. The
    archive is written next to `output` and renamed into place, so a failure leaves nothing behind.
    """
    adapter_dir, output = Path(adapter_dir), Path(output)
    members = archive_members(adapter_dir, include_tokenizer=include_tokenizer)
    links = {name: os.readlink(adapter_dir / name) for name in members if (adapter_dir / name).is_symlink()}
    if links:
        raise LinkedFileError(
            f"{adapter_dir}: "
            + "; ".join(f"{name} is a symbolic link to {target}" for name, target in links.items())
            + "; links are never followed: replace each with a copy of the file (nothing was packaged)"
        )
    missing = [name for name in members if not (adapter_dir / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{adapter_dir} lacks {', '.join(missing)}; it is not a PEFT adapter directory")
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=f".{output.name}.", dir=output.parent)
    try:
        # filename="" keeps the output's name out of the gzip header.
        with (
            os.fdopen(fd, "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL, mtime=0) as zipped,
            tarfile.open(fileobj=zipped, mode="w", format=tarfile.USTAR_FORMAT) as tar,
        ):
            for name in members:
                _add_file(tar, adapter_dir / name, name)
        # mkstemp makes the file 0600; an archive is for sharing (CDK's asset staging, S3), so it
        # gets the mode a plain write would, under the user's umask.
        os.chmod(partial, ARCHIVE_MODE & ~_umask())
        os.replace(partial, output)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return PackagedAdapter(path=output, sha256=file_sha256(output), size=output.stat().st_size, members=tuple(members))


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def _add_file(tar: tarfile.TarFile, source: Path, name: str) -> None:
    with open_regular_file(source) as stream:  # O_NOFOLLOW: a link swapped in since the check is refused
        info = tarfile.TarInfo(name)
        info.size = os.fstat(stream.fileno()).st_size
        info.mtime = 0
        info.mode = FILE_MODE
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.type = tarfile.REGTYPE
        tar.addfile(info, stream)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def archive_listing(path: Path) -> list[dict[str, object]]:
    """Each member's header fields, for snapshot tests and `cdk-adapters package` output."""
    with tarfile.open(path, "r:gz") as tar:
        return [
            {
                "name": member.name,
                "size": member.size,
                "mode": oct(member.mode),
                "mtime": member.mtime,
                "uid": member.uid,
                "gid": member.gid,
                "uname": member.uname,
                "gname": member.gname,
            }
            for member in tar.getmembers()
        ]


def gzip_header_mtime(path: Path) -> int:
    """The gzip header's MTIME field (bytes 4-7, little-endian); 0 in our archives."""
    with open(path, "rb") as stream:
        header = stream.read(10)
    return int.from_bytes(header[4:8], "little")


__all__ = [
    "LinkedFileError",
    "PackagedAdapter",
    "archive_listing",
    "archive_members",
    "file_sha256",
    "gzip_header_mtime",
    "package_adapter",
]
