"""No text a user reads tells pip to install ``cdk-adapters`` by name: no package index holds this
project under it, so the command fails (issue found by a new user), or installs whatever someone
else publishes under that name. Installs name the wheel's path, or the checkout."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BY_NAME = re.compile(r"pip install[^`]{0,200}?(?<![\w/.-])['\"]?cdk-adapters(\[|['\"`\s]|$)", re.M)


def user_facing_files() -> list[Path]:
    files = [REPO_ROOT / "README.md", REPO_ROOT / "pyproject.toml", REPO_ROOT / "benchmarks" / "README.md"]
    files += sorted((REPO_ROOT / "docs").glob("*.md")) + sorted((REPO_ROOT / "cdk_adapters").rglob("*.py"))
    return files


def test_no_install_command_names_the_project_by_name():
    found = [
        f"{path.relative_to(REPO_ROOT)}: {match.group(0)!r}"
        for path in user_facing_files()
        for match in BY_NAME.finditer(path.read_text())
    ]
    assert found == []


def test_the_pattern_sees_the_commands_it_refuses():
    for bad in (
        "pip install 'cdk-adapters[local]'",
        "pip install cdk-adapters",
        "pip install --extra-index-url X 'cdk-adapters[chart]'",
    ):
        assert BY_NAME.search(bad), bad
    for fine in (
        "pip install '/path/to/dist/cdk_adapters-0.1.0-py3-none-any.whl[local]'",
        "pip install -e '/work/cdk-adapters[local]'",
    ):
        assert not BY_NAME.search(fine), fine
