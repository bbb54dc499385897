"""Fixtures for the team-mode integration tests: one real stack per module, or a Redis."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.integration.stack import Browser, Stack, running_stack, start_redis


@pytest.fixture
def redis_url(tmp_path) -> Iterator[str]:
    """A Redis server: the one given by the environment, or a private one on a free port."""
    url, server = start_redis(tmp_path)
    try:
        yield url
    finally:
        if server is not None:
            with contextlib.suppress(Exception):
                server.stop()


@pytest.fixture(scope="module")
def team_stack() -> Iterator[Stack]:
    """Redis, PostgreSQL, the scripted LLM, a Celery worker and daphne, on loopback.

    The worker's heartbeat (which also re-reads Stops and follow-ups) is far beyond every
    timeout: follow-ups and Stop must reach it through the cross-process wake-up.
    """
    no_fallback = {"AGENTSITE_RUN_HEARTBEAT_SECONDS": "600"}
    with running_stack(mode="team", concurrency=8, extra_env=no_fallback) as stack:
        yield stack


@pytest.fixture
async def browser(team_stack: Stack) -> AsyncIterator[Browser]:
    async with Browser(team_stack.base_url) as client:
        await client.login()
        yield client
