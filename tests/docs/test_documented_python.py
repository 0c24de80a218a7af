"""Every Python block of README.md and docs/ is checked against the library it documents.

A block is parsed, its imports are run, and every call on what it imported is bound to the real
signature: a class, function or method that does not exist, or a keyword it does not take (or
a deprecated flat prop of the endpoint), fails here with the file and line (``AdapterClient(endpoint_name=...)`` and
``MultiAdapterEndpoint.from_manifest`` reached users that way). Names the block makes itself
(``stack``, ``path``) are left alone, and nothing is synthesized or sent. Inline code in the prose
that calls ``<export>.<attribute>(`` is held to the same rule.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import cdk_adapters
from cdk_adapters.endpoint.prop_groups import FLAT_PROPS

ENDPOINT_BUILDERS = (cdk_adapters.MultiAdapterEndpoint, cdk_adapters.endpoint_from_manifest)
"""They take the old flat props (`FLAT_PROPS`) with a warning; the documents show the grouped ones."""
REPO_ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
INLINE_CALL = re.compile(r"`(?:[^`]*?\b)?([A-Z]\w+)\.(\w+)\(")


@dataclass(frozen=True)
class Block:
    document: Path
    line: int
    source: str

    def __str__(self) -> str:
        return f"{self.document.relative_to(REPO_ROOT)}:{self.line}"


def python_blocks() -> list[Block]:
    blocks = []
    for document in DOCUMENTS:
        text = document.read_text()
        for match in BLOCK.finditer(text):
            blocks.append(Block(document, text.count("\n", 0, match.start()) + 2, match.group(1)))
    return blocks


def test_the_documents_have_python_blocks_to_check():
    assert len(python_blocks()) >= 15


class _Checker(ast.NodeVisitor):
    """Binds each call on an imported object (or on a variable made by one) to its signature."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self.known: dict[str, Any] = {}
        """Name -> the imported object, or the class a variable was made from."""
        self.problems: list[str] = []

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = importlib.import_module(node.module or "")
        for alias in node.names:
            if not hasattr(module, alias.name):
                try:
                    importlib.import_module(f"{node.module}.{alias.name}")
                except ImportError:
                    self.problems.append(f"line {node.lineno}: {node.module} has no {alias.name}")
                    continue
            self.known[alias.asname or alias.name] = getattr(module, alias.name, None) or importlib.import_module(
                f"{node.module}.{alias.name}"
            )

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] == "cdk_adapters":
                self.known[alias.asname or alias.name.split(".")[0]] = importlib.import_module(alias.name.split(".")[0])

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        made = self._made_by(node.value)
        if made is not None:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.known[target.id] = _Instance(made)

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        target = self._resolve(node.func, node.lineno)
        if target is None or isinstance(target, _Instance) or not callable(target):
            return
        try:
            signature = inspect.signature(target)
        except (TypeError, ValueError):
            return
        on_instance = isinstance(node.func, ast.Attribute) and isinstance(
            self._resolve(node.func.value, node.lineno, report=False), _Instance
        )
        if on_instance and inspect.isfunction(target):
            signature = _without_self(signature)
        keywords = {keyword.arg: None for keyword in node.keywords if keyword.arg is not None}
        positional = [None] * sum(1 for arg in node.args if not isinstance(arg, ast.Starred))
        if any(isinstance(arg, ast.Starred) for arg in node.args) or any(keyword.arg is None for keyword in node.keywords):
            return
        flat = sorted(set(keywords) & set(FLAT_PROPS)) if target in ENDPOINT_BUILDERS else []
        if flat:
            self.problems.append(f"line {node.lineno}: {ast.unparse(node.func)}(...): deprecated flat props {flat}")
        try:
            signature.bind_partial(*positional, **keywords)
            forwarded = self._forwarded_to(node.func, signature, keywords)
            if forwarded is not None:
                forwarded[0].bind_partial(**forwarded[1])
        except TypeError as error:
            self.problems.append(f"line {node.lineno}: {ast.unparse(node.func)}(...): {error}")

    def _forwarded_to(
        self, func: ast.expr, signature: inspect.Signature, keywords: dict
    ) -> tuple[inspect.Signature, dict] | None:
        """A classmethod's ``**options`` go to the class: its keywords beyond the named ones,
        and the class's own signature they must bind to."""
        if not isinstance(func, ast.Attribute) or not any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
            return None
        owner = self._resolve(func.value, func.lineno, report=False)
        if not inspect.isclass(owner) or not isinstance(inspect.getattr_static(owner, func.attr, None), classmethod):
            return None
        extra = {name: None for name in keywords if name not in signature.parameters}
        target = inspect.signature(owner)
        if any(p.kind is p.VAR_KEYWORD for p in target.parameters.values()):
            return None
        return target, extra

    def _made_by(self, value: ast.expr) -> Any:
        """The class a call makes (``Class(...)`` or ``Class.from_x(...)``), for method checks."""
        if not isinstance(value, ast.Call):
            return None
        func = value.func
        made = self._resolve(func, value.lineno, report=False)
        if inspect.isclass(made):
            return made
        if isinstance(func, ast.Attribute):
            owner = self._resolve(func.value, value.lineno, report=False)
            if inspect.isclass(owner) and isinstance(inspect.getattr_static(owner, func.attr, None), classmethod):
                return owner
        return None

    def _resolve(self, node: ast.expr, line: int, *, report: bool = True) -> Any:
        if isinstance(node, ast.Name):
            return self.known.get(node.id)
        if isinstance(node, ast.Attribute):
            owner = self._resolve(node.value, line, report=report)
            if owner is None:
                return None
            if isinstance(owner, _Instance):
                owner = owner.cls
                if not hasattr(owner, node.attr) and _instance_attribute(owner, node.attr):
                    return None  # set in __init__: no signature to check
            if not hasattr(owner, node.attr):
                if report:
                    self.problems.append(f"line {line}: {ast.unparse(node)}: {_name(owner)} has no attribute {node.attr!r}")
                return None
            return getattr(owner, node.attr)
        return None


@dataclass(frozen=True)
class _Instance:
    """A variable the block made by calling `cls`."""

    cls: type


def _instance_attribute(cls: type, name: str) -> bool:
    try:
        return f"self.{name}" in inspect.getsource(cls)
    except (OSError, TypeError):
        return True


def _without_self(signature: inspect.Signature) -> inspect.Signature:
    parameters = list(signature.parameters.values())
    return signature.replace(parameters=parameters[1:]) if parameters and parameters[0].name == "self" else signature


def _name(value: Any) -> str:
    return getattr(value, "__name__", type(value).__name__)


@pytest.mark.parametrize("block", python_blocks(), ids=str)
def test_a_documented_python_block_calls_what_exists_as_it_is_called(block):
    tree = ast.parse(block.source, filename=str(block))
    checker = _Checker(block)
    checker.visit(tree)
    assert checker.problems == [], f"{block}: " + "; ".join(checker.problems)


def test_inline_calls_in_the_prose_name_what_the_library_exports():
    problems = []
    for document in DOCUMENTS:
        for number, line in enumerate(document.read_text().splitlines(), 1):
            for owner, attribute in INLINE_CALL.findall(line):
                if owner in cdk_adapters.__all__ and not hasattr(getattr(cdk_adapters, owner), attribute):
                    problems.append(f"{document.relative_to(REPO_ROOT)}:{number}: {owner}.{attribute} does not exist")
    assert problems == []
