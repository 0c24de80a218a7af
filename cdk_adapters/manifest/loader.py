"""Reading a manifest file: YAML (duplicate keys refused) validated against the schema.

Every schema error is turned into a `Problem` naming the adapter (when the error is inside an
adapter row) and the field, and all of them are raised together.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from cdk_adapters.manifest.lock import LockFile, load_lock, lock_path_for
from cdk_adapters.manifest.schema import Manifest
from cdk_adapters.problems import ConfigurationError, Problem

DEFAULT_MANIFEST_PATH = Path("manifests/example.yaml")
"""What `app.py` and the CLI read when no path is given (``-c manifest=PATH`` / ``--manifest``)."""


@dataclass(frozen=True)
class LoadedManifest:
    """A validated manifest, where it came from (local sources are relative to it) and its lock."""

    manifest: Manifest
    path: Path
    lock_path: Path
    lock: LockFile

    def resolve_local(self, source: str) -> Path:
        candidate = Path(source).expanduser()
        return candidate if candidate.is_absolute() else (self.path.parent / candidate)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; in a manifest that hides a mistake."""


def _mapping_without_duplicates(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


def parse_manifest(text: str, *, subject: str = "manifest") -> Manifest:
    """Validate manifest YAML text; raises one `ConfigurationError` with every problem."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as error:
        raise ConfigurationError([Problem(subject, "(file)", f"is not valid YAML: {error}")]) from None
    if not isinstance(data, dict):
        raise ConfigurationError([Problem(subject, "(file)", "must be a YAML mapping with base_model and adapters")])
    try:
        return Manifest.model_validate(data)
    except ValidationError as error:
        raise ConfigurationError(_problems_from(error, data, subject), heading="invalid manifest") from None


def load_manifest(path: Path | str | None = None, *, lock_path: Path | None = None) -> LoadedManifest:
    """Read and validate the manifest at `path` (default `DEFAULT_MANIFEST_PATH`) and its lock file."""
    path = Path(path) if path is not None else DEFAULT_MANIFEST_PATH
    subject = f"manifest '{path}'"
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigurationError([Problem(subject, "(file)", "does not exist")]) from None
    manifest = parse_manifest(text, subject=subject)
    lock_path = Path(lock_path) if lock_path is not None else lock_path_for(path)
    return LoadedManifest(manifest=manifest, path=path, lock_path=lock_path, lock=load_lock(lock_path))


def _problems_from(error: ValidationError, data: dict, subject: str) -> list[Problem]:
    problems = []
    rows = data.get("adapters") if isinstance(data.get("adapters"), list) else []
    for detail in error.errors():
        loc = list(detail["loc"])
        about = subject
        if len(loc) >= 2 and loc[0] == "adapters" and isinstance(loc[1], int):
            row = rows[loc[1]] if loc[1] < len(rows) else None
            name = row.get("name") if isinstance(row, dict) else None
            about = f"adapter '{name}'" if isinstance(name, str) else f"adapters[{loc[1]}]"
            loc = loc[2:]
        field = ".".join(str(part) for part in loc) or "(row)"
        message = detail["msg"]
        if detail["type"] == "extra_forbidden":
            message = "is not a known field (check the spelling; unknown keys are errors)"
        elif message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        problems.append(Problem(about, field, message))
    return problems
