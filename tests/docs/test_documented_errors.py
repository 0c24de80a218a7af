"""docs/client.md's error table names every exception the client raises (AdapterThrottled was missing)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from cdk_adapters.client import errors

CLIENT_DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def test_every_client_error_has_a_row_in_the_error_table():
    text = CLIENT_DOC.read_text()
    table = text[text.index("| exception | raised when |") :]
    table = table[: table.index("\n\n")]
    documented = set(re.findall(r"^\| `(\w+)`", table, re.M))
    raised = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value)
        and issubclass(value, errors.AdapterClientError)
        and value not in (errors.AdapterClientError, errors.StructuredOutputError)
    }
    assert raised - documented == set()
    assert documented - raised == set()
