"""Fixtures for engine tests: no database, no network beyond loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testing.scripted_server import ScriptedServer


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    """A started scripted OpenAI-compatible server on a free loopback port."""
    server = ScriptedServer().start()
    try:
        yield server
    finally:
        server.stop()
