"""What an adapter directory or archive holds, read once and shared by every check.

Only small things are read: the file list, `adapter_config.json`, and the safetensors header of
`adapter_model.safetensors`. An archive is read in place (no extraction), so a hostile archive
with absolute paths or links cannot write anywhere.
"""

from __future__ import annotations

import json
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from cdk_adapters.compat.safetensors_header import (
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
    config: dict | None = None
    config_error: str | None = None
    weights_header: SafetensorsHeader | None = None
    weights_size: int | None = None
    weights_error: str | None = None
    archive_size: int | None = None
    unsafe_members: tuple[str, ...] = field(default=())

    @property
    def is_archive(self) -> bool:
        return self.origin == "archive"

    def root_file(self, name: str) -> str:
        return str(PurePosixPath(self.root, name)) if self.root else name

    def has_root_file(self, name: str) -> bool:
        return self.root_file(name) in self.files

    @classmethod
    def from_dir(cls, path: Path | str) -> "AdapterContents":
        path = Path(path)
        if not path.is_dir():
            return cls(origin="directory", location=str(path), files={}, config_error=f"{path} is not a directory")
        files: dict[str, int] = {}
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for filename in filenames:
                full = Path(dirpath, filename)
                if full.is_file():
                    files[full.relative_to(path).as_posix()] = full.stat().st_size
        root = _find_root(files)

        def open_file(relative: str):
            return open(path / relative, "rb")

        return cls._read(origin="directory", location=str(path), files=files, root=root, open_file=open_file)

    @classmethod
    def from_archive(cls, path: Path | str) -> "AdapterContents":
        path = Path(path)
        archive_size = path.stat().st_size if path.is_file() else None
        try:
            tar = tarfile.open(path, "r:gz")
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
            unsafe: list[str] = []
            for member in tar.getmembers():
                name = _normalise_member_name(member.name)
                if name is None:
                    unsafe.append(member.name)
                    continue
                if member.issym() or member.islnk() or member.isdev() or member.isfifo():
                    unsafe.append(member.name)
                    continue
                if member.isfile():
                    files[name] = member.size
                    members[name] = member
            root = _find_root(files)

            def open_file(relative: str):
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
            )

    @classmethod
    def _read(cls, *, origin, location, files, root, open_file, **extra) -> "AdapterContents":
        def rooted(name: str) -> str:
            return str(PurePosixPath(root, name)) if root else name

        config = config_error = None
        config_name = rooted(ADAPTER_CONFIG)
        if config_name not in files:
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
            except (UnicodeDecodeError, json.JSONDecodeError) as error:
                config_error = f"{ADAPTER_CONFIG} is not valid JSON ({error})"

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
