"""Every name the construct, the container and the client must agree on is spelt once, in the contract.

The scans read every module of `cdk_adapters/` and `container/` as source (a docstring that
mentions a name is prose and does not count; a string literal that *is* one does), and the
refusal checks give every reserved spelling to both sides, so a rule re-typed on one side, or a
spelling only one side refuses, fails here.
"""

from __future__ import annotations

import ast
import graphlib
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from adapter_server.launch import resolve_launch
from cdk_adapters.contract import (
    adapter_identity,
    capture_record,
    error_kinds,
    request_metrics,
    reserved_config,
    serving_env,
    tenant_limits,
)
from cdk_adapters.endpoint.serving_policy import ServingPolicy
from cdk_adapters.hosting.vllm_options import VllmOptions
from cdk_adapters.problems import ConfigurationError

REPO_ROOT = Path(__file__).resolve().parents[2]
CONTRACT = REPO_ROOT / "cdk_adapters" / "contract"
SOURCES = sorted([*(REPO_ROOT / "cdk_adapters").rglob("*.py"), *(REPO_ROOT / "container").rglob("*.py")])
VARIABLE = re.compile(r"^(CDK_ADAPTERS_[A-Z0-9_]*|SM_VLLM_)$")
KINDS = {value for name, value in vars(error_kinds).items() if name.isupper()}
SPELLINGS = {spelling for flag in reserved_config.REFUSED_FLAGS for spelling in flag.spellings}


def _literals(path: Path) -> list[tuple[str, int]]:
    """Every string constant in `path` and its line, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.value, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


NOT_ERROR_KINDS = {
    REPO_ROOT / "container" / "adapter_server" / "registration_service.py": {"engine_error", "bad_request"},
    REPO_ROOT / "cdk_adapters" / "deploy_check" / "handler" / "index.py": {"unhealthy"},
}
"""Outcome labels of the registrations metric: a vocabulary of their own that shares two words with
the error kinds (its ``engine_error`` counts 422, 500 and 503 answers alike). The deploy check's
Lambda handler is a one-folder asset that cannot import the contract: it carries a copy, which
tests/deploy_check/test_handler.py keeps equal to ``error_kinds.UNHEALTHY``."""
NOT_VLLM_FLAGS = {REPO_ROOT / "cdk_adapters" / "cli" / "local.py": {"--host", "--port"}}
"""The ``cdk-adapters local`` command's own options, not vLLM's."""


def _spelt(matches, allowed: set[Path], unrelated: dict[Path, set[str]] | None = None) -> tuple[list[str], Counter]:
    """Where a literal that `matches` is spelt outside `allowed` (`unrelated`: same words, other
    meaning), and how often each is spelt inside."""
    outside, inside = [], Counter()
    for path in SOURCES:
        for value, line in _literals(path):
            if not matches(value) or value in (unrelated or {}).get(path, ()):
                continue
            if path in allowed:
                inside[value] += 1
            else:
                outside.append(f"{path.relative_to(REPO_ROOT)}:{line}: {value!r}")
    return outside, inside


def test_every_container_variable_is_named_once_in_the_contract():
    outside, inside = _spelt(VARIABLE.match, set(CONTRACT.glob("*.py")))
    assert outside == [], "container variables spelt outside cdk_adapters/contract/"
    assert [name for name, count in inside.items() if count > 1] == [], "a variable defined twice in the contract"
    defined = {
        value
        for module in (serving_env, request_metrics, tenant_limits, capture_record, adapter_identity)
        for name, value in vars(module).items()
        if name.isupper() and isinstance(value, str) and VARIABLE.match(value)
    }
    assert defined == set(inside), "every variable the contract spells is a constant of one of its codecs"
    assert {serving_env.ALLOW_BASE_MODEL, request_metrics.EMF_ENV, tenant_limits.LIMITS_ENV} <= defined


def test_the_image_sets_only_contract_variables():
    from tests.support.staged_image import environment

    image = {
        name for name in environment((REPO_ROOT / "container" / "Dockerfile").read_text()) if name.startswith("CDK_ADAPTERS_")
    }
    assert image and image <= {serving_env.STATE_DIR, serving_env.NO_CUSTOM_CODE_DIR}


def test_every_error_kind_is_spelt_only_in_error_kinds():
    outside, inside = _spelt(KINDS.__contains__, {CONTRACT / "error_kinds.py"}, NOT_ERROR_KINDS)
    assert outside == [], "error kinds spelt outside cdk_adapters/contract/error_kinds.py"
    assert set(inside) == KINDS and max(inside.values()) == 1, "each kind defined once"


def test_every_reserved_flag_is_spelt_only_in_reserved_config():
    outside, inside = _spelt(SPELLINGS.__contains__, {CONTRACT / "reserved_config.py"}, NOT_VLLM_FLAGS)
    assert outside == [], "reserved vLLM flags spelt outside cdk_adapters/contract/reserved_config.py"
    named = {flag.flag for flag in reserved_config.REFUSED_FLAGS}
    assert named <= set(inside)


def _launcher_refuses(environ: dict[str, str], tmp_path: Path) -> list[str]:
    (tmp_path / "empty").mkdir(exist_ok=True)
    try:
        resolve_launch(environ, python="python", no_custom_code_dir=tmp_path / "empty", model_dir=tmp_path)
    except ConfigurationError as error:
        return [problem.field if problem.subject == serving_env.EXTRA_ARGS else problem.subject for problem in error.problems]
    return []


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_every_spelling_of_a_reserved_flag_is_refused_by_both_sides(spelling, tmp_path):
    for token in (spelling, spelling + "=1"):
        options = VllmOptions(extra_args=(token,))
        assert [problem.field for problem in options.problems("endpoint")] == ["vllm.extra_args"], token
        assert _launcher_refuses(options.environment(), tmp_path) == [spelling], token


def test_the_no_forms_and_the_middleware_are_reserved():
    assert {"--no-enable-lora", "--middleware"} <= SPELLINGS
    assert VllmOptions(extra_args=("--no-enable-lora",)).problems("endpoint")
    assert VllmOptions(extra_args=("--middleware", "my.Middleware")).problems("endpoint")


@pytest.mark.parametrize(
    "variable",
    sorted(
        [*reserved_config.CODE_LOADING_VARIABLES, *(prefix + "X" for prefix in reserved_config.CODE_LOADING_VARIABLE_PREFIXES)]
    ),
)
def test_every_refused_variable_is_refused_by_both_sides(variable, tmp_path):
    _, problems = ServingPolicy(environment={variable: "x"}).render(VllmOptions(), "endpoint")
    assert [problem.field for problem in problems] == [f"environment.{variable}"]
    assert _launcher_refuses({variable: "x"}, tmp_path) == [variable]


def _imports(path: Path) -> set[str]:
    """What `path` imports: ``from a.b import c`` counts ``a.b`` and ``a.b.c`` (a module or a name in it)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found


def test_the_contract_imports_only_the_standard_library_itself_and_the_error_type():
    """What lets the image copy the folder whole and a client import it with boto3 alone; and no cycle."""
    modules = {f"cdk_adapters.contract.{path.stem}": path for path in CONTRACT.glob("*.py") if path.stem != "__init__"}
    own = {*modules, "cdk_adapters.contract", "cdk_adapters.problems"}
    graph = {}
    for module, path in modules.items():
        imported = _imports(path)
        foreign = sorted(
            name
            for name in imported
            if name.split(".")[0] not in sys.stdlib_module_names | {"__future__"}
            and name not in own
            and name.rsplit(".", 1)[0] not in own
        )
        assert foreign == [], f"{module} imports {foreign}"
        graph[module] = (imported & set(modules)) - {module}
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the cycle
