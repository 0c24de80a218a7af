"""The container's refusal kinds come from the contract, the one list the client reads too."""

from __future__ import annotations

import ast
from pathlib import Path

from cdk_adapters.contract import error_kinds

SERVER = Path(__file__).resolve().parents[2] / "container" / "adapter_server"
CLIENT_ERRORS = Path(__file__).resolve().parents[2] / "cdk_adapters" / "client" / "errors.py"
KINDS = {name for name in vars(error_kinds) if name.isupper()}


def _refusal_kinds() -> list[tuple[str, int, ast.expr]]:
    found = []
    for module in sorted(SERVER.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Refusal" and len(node.args) >= 2:
                found.append((module.name, node.lineno, node.args[1]))
    return found


def test_every_refusal_the_container_sends_names_a_contract_kind():
    refusals = _refusal_kinds()
    assert len(refusals) >= 20  # every Refusal(...) in the server was seen, not none
    spelled = [
        f"{module}:{line}"
        for module, line, kind in refusals
        if not (isinstance(kind, ast.Attribute) and getattr(kind.value, "id", None) == "error_kinds" and kind.attr in KINDS)
    ]
    assert spelled == [], "refusal kinds spelled out instead of read from cdk_adapters.contract.error_kinds"
    used = {kind.attr for _, _, kind in refusals}
    assert used == KINDS, f"kinds the container never sends: {sorted(KINDS - used)}"


def test_the_client_reads_the_kinds_it_types_from_the_contract():
    source = CLIENT_ERRORS.read_text()
    compared = {
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == "error_kinds"
    }
    assert compared == {
        "ADAPTER_NOT_FOUND",
        "ADAPTER_REQUIRED",
        "PAYLOAD_TOO_LARGE",
        "ADAPTER_LOAD_FAILED",
        "UNHEALTHY",
        "ADAPTER_THROTTLED",
    }
    assert not [value for value in (getattr(error_kinds, k) for k in KINDS) if f'"{value}"' in source]
