"""Automatic titles in team mode (issue 46): the Celery worker that answered makes the
title after the run, on its run loop, and the title reaches the page through Redis.

A stack of its own, with automatic titles on (tests/conftest.py turns them off for the
processes tests start). The title call's reply is held at the scripted server until the
run is over, so the order is observed, not timed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from tests.integration.runs import run_ends, tag, worker_logged
from tests.integration.stack import (
    Browser,
    Frames,
    Stack,
    async_wait_for,
    run_id_of,
    running_stack,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def titles_stack() -> Iterator[Stack]:
    with running_stack(mode="team", extra_env={"AGENTSITE_AUTO_TITLES": "true"}) as stack:
        yield stack


async def requests_with(stack: Stack, marker: str) -> list[dict]:
    recorded = await asyncio.to_thread(stack.llm_requests)
    return [r["body"] for r in recorded if marker in json.dumps(r["body"])]


async def test_the_worker_titles_the_conversation_after_its_first_answer(
    titles_stack: Stack,
) -> None:
    stack, marker = titles_stack, tag("TITLE")
    stack.script(
        rules=[
            {
                "contains": marker,
                "in": "any",
                "responses": [
                    {"chunks": ["Answered ", "by the worker."]},
                    {"content": "Worker made title.", "after_release": marker},
                ],
            }
        ]
    )
    async with Browser(stack.base_url) as browser:
        await browser.login()
        conversation_id = await browser.new_conversation()
        async with Frames(browser.socket(conversation_id), describe=stack.logs) as frames:
            response = await browser.send(conversation_id, f"{marker}: what is a title?")
            run_id = run_id_of(response)
            # The run ends, its status written, while the title call is still held.
            row = await run_ends(stack, run_id)
            assert row["status"] == "succeeded", row

            async def title_call_made() -> bool:
                return len(await requests_with(stack, marker)) == 2

            await async_wait_for(
                title_call_made,
                timeout=20,
                what="the title call",
                detail=stack.logs,
            )
            title = await asyncio.to_thread(
                stack.query, "SELECT title FROM conversations_conversation WHERE id = %s",
                conversation_id,
            )  # fmt: skip
            assert title == [(f"{marker}: what is a title?",)]  # the first message's
            await asyncio.to_thread(stack.release, marker)

            frame = await frames.wait(
                lambda f: "data-retitled" in f, timeout=20, what="the title frame"
            )

    assert 'value="Worker made title"' in frame
    rows = await asyncio.to_thread(
        stack.query,
        "SELECT title, title_by_user FROM conversations_conversation WHERE id = %s",
        conversation_id,
    )
    assert rows == [("Worker made title", False)]
    title_request = (await requests_with(stack, marker))[-1]
    assert "stream" not in title_request
    await worker_logged(stack, f"conversation {conversation_id} titled after run {run_id}")
    assert f"titled after run {run_id}" not in stack.daphne.text()  # made in the worker
