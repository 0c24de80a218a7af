"""What a user reads (messages, docstrings, docs, the README, the container's code) cites only
what a user has: public pages and this repository, never the project's internal notes."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
USER_FACING = ("cdk_adapters", "container", "docs", "README.md", "app.py", "manifests", ".dockerignore", "Makefile")
INTERNAL = re.compile(r"\bSPEC\b|SPEC\.md|OPERATIONS-FACTS|ARCHITECTURE\.md|\bsection \d|§\s*\d|\.\./shared|/work/shared")


def user_facing_files() -> list[Path]:
    files = []
    for name in USER_FACING:
        path = REPO_ROOT / name
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        files += [p for p in candidates if "__pycache__" not in p.parts and p.suffix not in (".pyc", ".tar.gz", ".safetensors")]
    return files


def test_no_user_facing_text_cites_internal_notes():
    found = [
        f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
        for path in user_facing_files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if INTERNAL.search(line)
    ]
    assert found == []


def test_the_pattern_finds_what_it_must():
    for text in ("see SPEC section 4", "(OPERATIONS-FACTS §1.2)", "SPEC §5", "per ARCHITECTURE.md"):
        assert INTERNAL.search(text), text
    assert not INTERNAL.search("TORCH_SPEC := torch==2.13.0+cpu and BaseModelSpec")
