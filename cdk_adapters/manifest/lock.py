"""The lock file: what each published (``s3://``) adapter archive contains, committed beside the manifest.

Synth must be offline and reproducible, yet the gate must see an S3 adapter's rank and target
modules. `cdk-adapters publish` and `cdk-adapters lock` read the archive once and record its facts
and sha256 here; synth checks the facts, and `lock` refuses an object whose bytes changed under a
name that was already locked (a published name never changes content).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cdk_adapters.compat.adapter_facts import AdapterFacts
from cdk_adapters.problems import ConfigurationError, Problem

LOCK_VERSION = 1
LOCK_SUFFIX = ".lock.json"


class LockEntry(BaseModel):
    """One published archive: where, which bytes, and the facts the gate needs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    uri: str = Field(pattern=r"^s3://[^/]+/.+\.tar\.gz$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(gt=0)
    peft_type: str | None
    rank: int | None
    max_rank: int | None
    alpha: float | None
    target_modules: tuple[str, ...]
    base_model_name_or_path: str | None
    revision: str | None
    use_dora: bool = False
    modules_to_save: tuple[str, ...] = ()
    bias: str = "none"
    trainable_token_indices: bool = False
    vision_modules: tuple[str, ...] = ()

    @classmethod
    def from_facts(cls, *, uri: str, sha256: str, size: int, facts: AdapterFacts) -> "LockEntry":
        return cls(uri=uri, sha256=sha256, size=size, **facts.to_dict())

    def facts(self) -> AdapterFacts:
        return AdapterFacts.from_dict(self.model_dump(exclude={"uri", "sha256", "size"}))


class LockFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = LOCK_VERSION
    adapters: dict[str, LockEntry] = Field(default_factory=dict)


def lock_path_for(manifest_path: Path) -> Path:
    """``manifests/example.yaml`` -> ``manifests/example.lock.json``."""
    manifest_path = Path(manifest_path)
    return manifest_path.with_name(manifest_path.name.rsplit(".", 1)[0] + LOCK_SUFFIX)


def load_lock(path: Path) -> LockFile:
    """The lock file at `path`; an absent file is an empty lock (nothing published yet)."""
    path = Path(path)
    if not path.exists():
        return LockFile()
    subject = f"lock file '{path}'"
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ConfigurationError([Problem(subject, "(file)", f"is not valid JSON: {error}")]) from None
    try:
        return LockFile.model_validate(data)
    except ValidationError as error:
        raise ConfigurationError(
            [
                Problem(subject, ".".join(str(part) for part in detail["loc"]) or "(file)", detail["msg"])
                for detail in error.errors()
            ]
        ) from None


def write_lock(path: Path, lock: LockFile) -> None:
    """Write sorted, indented JSON so that the lock diffs well in review."""
    data = lock.model_dump(mode="json")
    data["adapters"] = dict(sorted(data["adapters"].items()))
    Path(path).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
