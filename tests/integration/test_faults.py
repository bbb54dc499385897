"""Faults injected into a real team-mode stack on loopback (daphne, a Celery worker,
Redis, PostgreSQL, the scripted LLM): what a user saw survives, run states stay honest,
event numbers only increase."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.stack import (
    Browser,
    Frames,
    Stack,
    async_wait_for,
    run_id_of,
    running_stack,
    stop_reading,
)

pytestmark = pytest.mark.integration

STALE_SECONDS = 3  # a run without a heartbeat this long is dead (the default is 25)


FAST_SWEEP = {
    "AGENTSITE_RUN_STALE_SECONDS": str(STALE_SECONDS),
    "AGENTSITE_RUN_SWEEP_SECONDS": "0.5",
    "AGENTSITE_RUN_HEARTBEAT_SECONDS": "0.5",
}


@pytest.fixture(scope="module")
def fault_stack() -> Iterator[Stack]:
    """One worker that a test may kill; heartbeats and sweeps sped up to match."""
    with running_stack(mode="team", workers=1, extra_env=FAST_SWEEP) as stack:
        yield stack


@pytest.fixture(scope="module")
def two_worker_stack() -> Iterator[Stack]:
    with running_stack(mode="team", workers=2, extra_env=FAST_SWEEP) as stack:
        yield stack


class EventStream:
    """The conversation's SSE stream (``follow``), read in the background."""

    def __init__(self, browser: Browser, conversation_id: int) -> None:
        self.path = f"/api/conversations/{conversation_id}/events?follow=1"
        self.http = browser.http
        self.events: list[tuple[int, str, dict[str, Any]]] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> EventStream:
        self._task = asyncio.ensure_future(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await stop_reading(self._task)

    async def _read(self) -> None:
        async with self.http.stream("GET", self.path, timeout=None) as response:
            fields: dict[str, str] = {}
            async for line in response.aiter_lines():
                if line:
                    name, _, value = line.partition(": ")
                    fields[name] = value
                elif "id" in fields:
                    self.events.append(
                        (int(fields["id"]), fields["event"], json.loads(fields["data"]))
                    )
                    fields = {}

    def answer(self) -> str:
        return "".join(
            p.get("content", "") for _i, e, p in self.events if e == "answer" and "content" in p
        )


async def test_a_worker_killed_mid_answer_is_reported_and_nothing_shown_is_lost(
    fault_stack: Stack,
) -> None:
    stack, marker = fault_stack, f"KILLED-{secrets.token_hex(3)}"
    words = [f"word{i} " for i in range(200)]
    stack.script(
        rules=[
            {
                "contains": marker,
                "in": "any",
                "responses": [{"content": "Done."}, {"chunks": words, "chunk_delay": 0.1}],
            }
        ]
    )
    async with Browser(stack.base_url) as browser:
        await browser.login()
        conversation_id = await browser.new_conversation()
        socket = Frames(browser.socket(conversation_id), describe=stack.logs)
        async with EventStream(browser, conversation_id) as stream, socket as frames:
            run_id = run_id_of(await browser.send(conversation_id, f"{marker}: talk"))
            await async_wait_for(
                lambda: stream.answer().count("word") >= 10,
                timeout=30,
                what="ten answer words",
                detail=stack.logs,
            )
            assert stack.worker is not None
            stack.worker.popen.kill()  # kill -9, mid-answer, and no other worker
            killed_at = time.monotonic()
            report = await async_wait_for(
                lambda: next((e for e in stream.events if e[1] == "error"), None),
                timeout=30,
                what="the interrupted report on the event stream",
                detail=stack.logs,
            )
            reported_after = time.monotonic() - killed_at
            await frames.wait(
                lambda f: "interrupted" in f, timeout=10, what="the report on the page"
            )

    ids = [event_id for event_id, _e, _p in stream.events]
    assert ids == sorted(set(ids)), "event numbers must only increase"
    assert report[0] == max(ids) and "interrupted" in report[2]["message"]
    assert reported_after < STALE_SECONDS + 10  # the servers sweep, no worker needed
    rows = await asyncio.to_thread(
        stack.query,
        "SELECT r.status, m.content, m.incomplete FROM conversations_run r "
        "LEFT JOIN conversations_message m ON m.run_id = r.id AND m.role = 'assistant' "
        "WHERE r.id = %s",
        run_id,
    )
    status, kept, incomplete = rows[0]
    assert status == "failed"
    assert incomplete and kept and stream.answer().startswith(kept)  # what reached the log


async def test_a_conversation_goes_on_on_the_other_worker_after_one_is_killed(
    two_worker_stack: Stack,
) -> None:
    stack, marker = two_worker_stack, f"SURVIVOR-{secrets.token_hex(3)}"
    words = [f"word{i} " for i in range(200)]
    stack.script(
        rules=[
            {
                "contains": f"{marker}: first",
                "responses": [{"content": "Done."}, {"chunks": words, "chunk_delay": 0.1}],
            },
            {
                "contains": f"{marker}: again",
                "responses": [{"content": "Done."}, {"chunks": ["Still ", "here."]}],
            },
        ]
    )
    async with Browser(stack.base_url) as browser:
        await browser.login()
        conversation_id = await browser.new_conversation()
        async with EventStream(browser, conversation_id) as stream:
            first = run_id_of(await browser.send(conversation_id, f"{marker}: first"))
            await async_wait_for(
                lambda: stream.answer().count("word") >= 5,
                timeout=30,
                what="five answer words",
                detail=stack.logs,
            )
            # A worker's run loop starts with its first run: the one that logged it runs this.
            running = [w for w in stack.workers if "runs execute on" in w.text()]
            assert len(running) == 1, [w.name for w in running]
            running[0].popen.kill()
            await async_wait_for(
                lambda: any(e[1] == "error" for e in stream.events),
                timeout=30,
                what="the interrupted report",
                detail=stack.logs,
            )
            second = run_id_of(await browser.send(conversation_id, f"{marker}: again"))
            await async_wait_for(
                lambda: any(e[1] == "done" for e in stream.events),
                timeout=30,
                what="the answer from the other worker",
                detail=stack.logs,
            )

    ids = [event_id for event_id, _e, _p in stream.events]
    assert ids == sorted(set(ids)), "event numbers must only increase"
    statuses = await asyncio.to_thread(
        stack.query,
        "SELECT id, status FROM conversations_run WHERE id IN (%s, %s) ORDER BY id",
        first,
        second,
    )
    assert statuses == [(first, "failed"), (second, "succeeded")]
    assert stream.answer().endswith("Still here.")
