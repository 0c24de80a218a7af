"""Every import the README, the docs and the example app show works, and so does every module path
of the flat package root that preceded the folders (with a warning naming the new place)."""

import ast
import importlib
import re
import sys
import warnings
from pathlib import Path

import pytest

import cdk_adapters

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO_ROOT / "README.md", REPO_ROOT / "CONTRIBUTING.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"```python\n(.*?)```", re.S)


def documented_imports() -> list[tuple[str, str, tuple[str, ...]]]:
    """(where, module, names) for each ``from cdk_adapters... import ...`` in a python block or app.py."""
    sources = [(path.name, block) for path in DOCUMENTS for block in FENCE.findall(path.read_text())]
    sources.append(("app.py", (REPO_ROOT / "app.py").read_text()))
    found = []
    for where, source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:  # a block with "..." placeholders: take its import lines alone
            lines = [line for line in source.splitlines() if line.startswith(("from cdk_adapters", "import cdk_adapters"))]
            tree = ast.parse("\n".join(line for line in lines if not line.rstrip().endswith("(")))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cdk_adapters"):
                found.append((where, node.module, tuple(alias.name for alias in node.names)))
    return found


IMPORTS = documented_imports()


def test_the_documents_show_imports_at_all():
    assert len(IMPORTS) >= 15
    assert {"README.md", "app.py"} <= {where for where, _, _ in IMPORTS}


@pytest.mark.parametrize(("where", "module", "names"), IMPORTS, ids=[f"{w}:{m}" for w, m, _ in IMPORTS])
def test_a_documented_import_works_without_a_deprecation(where, module, names):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        loaded = importlib.import_module(module)
        missing = [name for name in names if not hasattr(loaded, name)]
    assert not missing, f"{where}: from {module} import {', '.join(missing)}"


def test_every_public_name_resolves_from_the_package_root():
    unresolved = [name for name in cdk_adapters.__all__ if getattr(cdk_adapters, name, None) is None]
    assert not unresolved


@pytest.mark.parametrize("old", sorted(cdk_adapters._MOVED))
def test_a_module_path_of_the_flat_root_still_imports_as_the_moved_module(old):
    new = importlib.import_module(f"cdk_adapters.{cdk_adapters._MOVED[old]}")
    sys.modules.pop(f"cdk_adapters.{old}", None)  # another test may have imported it already
    with pytest.warns(DeprecationWarning, match=f"cdk_adapters.{old} moved to {new.__name__}"):
        legacy = importlib.import_module(f"cdk_adapters.{old}")
    assert legacy is new


@pytest.mark.parametrize(
    ("package", "name"), [("endpoint", "MultiAdapterEndpoint"), ("deploy_check", "DeployCheck"), ("deploy_check", "AdapterCheck")]
)
def test_the_two_modules_that_became_folders_still_export_their_classes(package, name):
    assert getattr(importlib.import_module(f"cdk_adapters.{package}"), name) is getattr(cdk_adapters, name)
