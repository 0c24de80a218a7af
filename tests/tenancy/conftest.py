from __future__ import annotations

import pytest

from tests.gate.zoo import AdapterZoo, session_zoo


@pytest.fixture(scope="session")
def zoo(tmp_path_factory) -> AdapterZoo:
    """Real PEFT adapters, built once per session (shared with the other test folders)."""
    return session_zoo(tmp_path_factory)
