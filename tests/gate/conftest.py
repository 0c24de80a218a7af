from __future__ import annotations

import pytest

from tests.gate.zoo import AdapterZoo, session_zoo


@pytest.fixture(scope="session")
def zoo(tmp_path_factory) -> AdapterZoo:
    return session_zoo(tmp_path_factory)
