"""The session's adapter zoo (tiny Llama and real PEFT adapters), shared with the other test folders."""

from __future__ import annotations

import pytest

from tests.gate.zoo import AdapterZoo, session_zoo


@pytest.fixture(scope="session")
def zoo(tmp_path_factory) -> AdapterZoo:
    return session_zoo(tmp_path_factory)
