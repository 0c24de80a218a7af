"""Reading a manifest file: YAML (duplicate keys refused) validated against the schema.

Every schema error is turned into a `Problem` naming the adapter (when the error is inside an
adapter row) and the field, and all of them are raised together.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from cdk_adapters.manifest.lock import LockFile, load_lock, lock_path_for
from cdk_adapters.manifest.schema import AdapterRow, AlarmOverrides, Manifest
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

    @property
    def deprecations(self) -> list[Problem]:
        """Fields still read but going away, each with what to write instead."""
        return deprecated_fields(self.manifest)

    def resolve_local(self, source: str) -> Path:
        candidate = Path(source).expanduser()
        return candidate if candidate.is_absolute() else (self.path.parent / candidate)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; in a manifest that hides a mistake."""


def _mapping_without_duplicates(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


@dataclass(frozen=True)
class PartialManifest:
    """A manifest whose invalid adapter rows were set aside, so the gate can still check the others."""

    loaded: LoadedManifest
    rejected_names: tuple[str, ...]
    """Names of the rows that failed the schema (those that have a string name)."""


def _yaml_mapping(text: str, subject: str) -> dict[str, Any]:
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as error:
        raise ConfigurationError([Problem(subject, "(file)", f"is not valid YAML: {error}")]) from None
    if not isinstance(data, dict):
        raise ConfigurationError([Problem(subject, "(file)", "must be a YAML mapping with base_model and adapters")])
    return data


class ManifestDeprecationWarning(FutureWarning):
    """A manifest uses a field that is still read but will be removed (shown by default: manifests
    are written by users, not only by Python developers)."""


def deprecated_fields(manifest: Manifest) -> list[Problem]:
    """One problem per use of a deprecated field, saying what to write instead."""
    return [
        Problem(
            f"adapter '{row.name}'",
            "target_modules_differ_reason",
            "is deprecated and will not be read by the next version; write "
            f"acknowledge: {{rule: identical-target-modules, reason: {row.target_modules_differ_reason!r}}}",
        )
        for row in manifest.adapters
        if row.target_modules_differ_reason is not None
    ]


def parse_manifest(text: str, *, subject: str = "manifest") -> Manifest:
    """Validate manifest YAML text; raises one `ConfigurationError` with every problem.

    A deprecated field is read, with a `ManifestDeprecationWarning` per use.
    """
    data = _yaml_mapping(text, subject)
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as error:
        raise ConfigurationError(_problems_from(error, data, subject), heading="invalid manifest") from None
    for deprecation in deprecated_fields(manifest):
        warnings.warn(f"{subject}: {deprecation}", ManifestDeprecationWarning, stacklevel=2)
    return manifest


def _read(path: Path, subject: str) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise ConfigurationError([Problem(subject, "(file)", "does not exist")]) from None


def load_manifest(path: Path | str | None = None, *, lock_path: Path | None = None) -> LoadedManifest:
    """Read and validate the manifest at `path` (default `DEFAULT_MANIFEST_PATH`) and its lock file."""
    path = Path(path) if path is not None else DEFAULT_MANIFEST_PATH
    manifest = parse_manifest(_read(path, f"manifest '{path}'"), subject=f"manifest '{path}'")
    lock_path = Path(lock_path) if lock_path is not None else lock_path_for(path)
    return LoadedManifest(manifest=manifest, path=path, lock_path=lock_path, lock=load_lock(lock_path))


def load_valid_rows(path: Path | str | None = None, *, lock_path: Path | None = None) -> PartialManifest | None:
    """The manifest at `path` without its schema-invalid adapter rows.

    ``None`` when nothing can be salvaged: the file, the base model, the serving limits or the
    lock file are themselves invalid. Used only to report the gate's problems on the valid rows
    together with the schema's problems on the others.
    """
    path = Path(path) if path is not None else DEFAULT_MANIFEST_PATH
    try:
        data = _yaml_mapping(_read(path, f"manifest '{path}'"), f"manifest '{path}'")
        listed = data.get("adapters")
        rows: list[Any] = listed if isinstance(listed, list) else []
        valid, rejected = [], []
        for row in rows:
            try:
                AdapterRow.model_validate(row)
                valid.append(row)
            except ValidationError:
                name = row.get("name") if isinstance(row, dict) else None
                if isinstance(name, str):
                    rejected.append(name)
        manifest = Manifest.model_validate({**data, "adapters": valid})
        lock_path = Path(lock_path) if lock_path is not None else lock_path_for(path)
        loaded = LoadedManifest(manifest=manifest, path=path, lock_path=lock_path, lock=load_lock(lock_path))
    except (ConfigurationError, ValidationError):
        return None
    return PartialManifest(loaded=loaded, rejected_names=tuple(rejected))


def _problems_from(error: ValidationError, data: dict[str, Any], subject: str) -> list[Problem]:
    problems = []
    listed = data.get("adapters")
    rows: list[Any] = listed if isinstance(listed, list) else []
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
            if len(loc) >= 2 and loc[-2] == "alarms":
                message += f"; known: {', '.join(AlarmOverrides.model_fields)}"
        elif message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        problems.append(Problem(about, field, message))
    return problems
