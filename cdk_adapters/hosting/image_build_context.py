"""Where the serving image's Docker build context comes from: a checkout, or the installed package.

In a checkout the context is the repository root, filtered by its `.dockerignore`. A pip-installed
library has no repository around it: the wheel carries `container/` as ``cdk_adapters/_container/``
(see setup.py), and the standard-library modules the image copies are the installed package's
own. `assemble` lays those files out as the repository would, exactly the sources the
Dockerfile's ``COPY`` lines name, so the same Dockerfile builds the same image either way.
Standard-library only.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
"""The installed `cdk_adapters` package (this module sits in its `hosting/` folder)."""
REPOSITORY_ROOT = PACKAGE_DIR.parent
"""The checkout's root, when this module runs from one (an editable install counts)."""

PACKAGED_CONTAINER = PACKAGE_DIR / "_container"
"""The repository's `container/` directory as the wheel installs it."""

DOCKERFILE = "container/Dockerfile"
"""The Dockerfile, relative to the build context."""

_GENERATED = "__pycache__"


def in_checkout() -> bool:
    """True when the repository root (with its Dockerfile and `.dockerignore`) is beside the package."""
    return (REPOSITORY_ROOT / DOCKERFILE).is_file() and (REPOSITORY_ROOT / ".dockerignore").is_file()


def installed_path(relative: str) -> Path:
    """Where an installed cdk-adapters keeps the build-context path `relative` (``container/...``
    or ``cdk_adapters/...``)."""
    top, _, rest = relative.strip("/").partition("/")
    if top == "container":
        return PACKAGED_CONTAINER / rest
    if top == "cdk_adapters":
        return PACKAGE_DIR / rest
    raise ValueError(f"{relative!r} is outside what the installed package carries (container/, cdk_adapters/)")


def copy_sources(dockerfile_text: str) -> list[str]:
    """The context paths the Dockerfile's ``COPY`` instructions read (options and targets dropped)."""
    joined = re.sub(r"\\\n", " ", dockerfile_text)
    sources: list[str] = []
    for line in joined.splitlines():
        keyword, _, rest = line.strip().partition(" ")
        if keyword.upper() != "COPY":
            continue
        *found, _target = [token for token in shlex.split(rest) if not token.startswith("--")]
        sources += found
    return sources


def missing_from_installation() -> list[str]:
    """Build-context paths the installed package lacks (empty when `assemble` can run)."""
    dockerfile = installed_path(DOCKERFILE)
    if not dockerfile.is_file():
        return [DOCKERFILE]
    return [source for source in copy_sources(dockerfile.read_text()) if not installed_path(source).exists()]


def assemble(target: Path) -> Path:
    """Write the build context into `target` (replacing what was there) from the installed package."""
    dockerfile = installed_path(DOCKERFILE)
    if target.exists():
        shutil.rmtree(target)
    _copy(dockerfile, target / DOCKERFILE)
    for source in copy_sources(dockerfile.read_text()):
        origin = installed_path(source)
        files = [origin] if origin.is_file() else sorted(p for p in origin.rglob("*") if p.is_file())
        for path in files:
            inside = path.relative_to(origin)
            if _GENERATED in inside.parts or path.suffix == ".pyc":
                continue
            _copy(path, target / source.strip("/") / inside if inside.parts else target / source)
    return target


def _copy(source: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, destination)
