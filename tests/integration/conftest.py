"""Fixtures for the team-mode integration tests: one real stack per module."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.integration.stack import Browser, Stack, running_stack


@pytest.fixture(scope="module")
def team_stack() -> Iterator[Stack]:
    """Redis, PostgreSQL, the scripted LLM, a Celery worker and daphne, on loopback.

    The worker's fallback poll is far beyond every timeout: follow-ups and Stop must reach
    it through the cross-process wake-up.
    """
    no_fallback = {"AGENTSITE_RUN_POLL_SECONDS": "600"}
    with running_stack(mode="team", concurrency=8, extra_env=no_fallback) as stack:
        yield stack


@pytest.fixture
async def browser(team_stack: Stack) -> AsyncIterator[Browser]:
    async with Browser(team_stack.base_url) as client:
        await client.login()
        yield client
