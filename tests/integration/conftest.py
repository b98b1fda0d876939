"""Servers the integration tests share: one of each per session (every start is bounded; every server is stopped)."""

import pytest

from tests.integration.servers import scripted_llm_server


@pytest.fixture(scope="session")
def scripted_server():
    """tests/integration/scripted_llm_server.py: an OpenAI-compatible server whose answers each test scripts."""
    with scripted_llm_server() as server:
        yield server
