"""Faults injected into a real team-mode stack on loopback (daphne, a Celery worker,
Redis, PostgreSQL, the scripted LLM): what a user saw survives, run states stay honest,
event numbers only increase."""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import Iterator

import pytest

from tests.integration.observers import EventStream, assert_consistent
from tests.integration.stack import (
    Browser,
    Frames,
    Stack,
    async_wait_for,
    run_id_of,
    running_stack,
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
                "responses": [{"chunks": words, "chunk_delay": 0.1}],
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
            shown = await frames.wait(
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
    # The page's report replaces the answer it showed with the one kept.
    kept_words = kept.split()
    assert kept_words[-1] in shown and not re.search(rf"\bword{len(kept_words)}\b", shown)
    assert report[2]["answer"] == kept
    assert_consistent(stack, conversation_id, [f"{marker}: talk"], stream)


async def test_a_conversation_goes_on_on_the_other_worker_after_one_is_killed(
    two_worker_stack: Stack,
) -> None:
    stack, marker = two_worker_stack, f"SURVIVOR-{secrets.token_hex(3)}"
    words = [f"word{i} " for i in range(200)]
    stack.script(
        rules=[
            {
                "contains": f"{marker}: first",
                "responses": [{"chunks": words, "chunk_delay": 0.1}],
            },
            {
                "contains": f"{marker}: again",
                "responses": [{"chunks": ["Still ", "here."]}],
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


# ------------------------------------------------------------------- services and servers


def slow_answer(marker: str, words: int = 120, delay: float = 0.05) -> dict:
    """A rule: the loop decides at once, then the answer streams ``words`` words slowly."""
    chunks = [f"word{i} " for i in range(words)]
    return {
        "contains": marker,
        "in": "any",
        "responses": [{"chunks": chunks, "chunk_delay": delay}],
    }


def quick_answer(marker: str, text: str) -> dict:
    return {"contains": marker, "in": "any", "responses": [text]}


async def words_shown(stream: EventStream, count: int, stack: Stack) -> None:
    await async_wait_for(
        lambda: stream.answer().count("word") >= count,
        timeout=30,
        what=f"{count} answer words",
        detail=stack.logs,
    )


async def run_ended(stream: EventStream, count: int, stack: Stack, timeout: float = 60) -> None:
    await async_wait_for(
        lambda: stream.ended(count), timeout=timeout, what=f"{count} runs to end", detail=stack.logs
    )


async def test_a_redis_restart_mid_stream_loses_nothing(tmp_path) -> None:
    """Redis (channel layer, broker, cache) goes away mid-answer and comes back empty.

    The streaming run finishes and its clients converge on the stored answer; a page load
    during the outage works; a message posted during it is saved and its run reported as
    not started (Retry starts it once Redis is back); the conversation then goes on.
    """
    marker = f"REDIS-{secrets.token_hex(3)}"
    with running_stack(mode="team", private_redis=True, extra_env=FAST_SWEEP) as stack:
        stack.script(
            rules=[
                slow_answer(f"{marker}: long"),
                quick_answer(f"{marker}: meanwhile", "Answered after the outage."),
                quick_answer(f"{marker}: after", "Still here."),
            ]
        )
        async with Browser(stack.base_url) as browser:
            await browser.login()
            first, second = await browser.new_conversation(), await browser.new_conversation()
            page = Frames(browser.socket(first), describe=stack.logs)
            async with (
                EventStream(browser, first) as stream,
                EventStream(browser, second) as other,
                page as frames,
            ):
                await browser.send(first, f"{marker}: long")
                await words_shown(stream, 10, stack)
                stack.processes["redis"].kill()

                reload = await browser.http.get(f"/c/{first}/")
                assert reload.status_code == 200 and f"{marker}: long" in reload.text
                joined = await browser.http.get(f"/api/conversations/{first}/events")
                assert joined.status_code == 503, joined.text[:300]
                assert "briefly unavailable" in joined.json()["error"]
                posted = await browser.send(second, f"{marker}: meanwhile")
                assert "task queue is not answering" in posted.text
                stranded = run_id_of(posted)

                stack.restart_redis()
                await run_ended(stream, 1, stack)
                await run_ended(other, 1, stack)
                retried = await browser.post(f"/runs/{stranded}/retry/")
                assert retried.status_code == 200, retried.text[:300]
                await run_ended(other, 2, stack)
                await browser.send(first, f"{marker}: after")
                await run_ended(stream, 2, stack)
                await frames.wait(
                    lambda f: "Still here." in f, timeout=20, what="the answer after the outage"
                )

            assert stream.runs()[0][-1][2]["answer"].endswith("word119 ")
            assert_consistent(stack, first, [f"{marker}: long", f"{marker}: after"], stream)
            assert_consistent(stack, second, [f"{marker}: meanwhile"], other)
            [(status,)] = stack.query(
                "SELECT status FROM conversations_run WHERE id = %s", stranded
            )
            assert status == "failed"  # the first attempt says so; the retry answered
            assert other.runs()[-1][-1][2]["answer"] == "Answered after the outage."


async def test_one_of_two_servers_killed_its_clients_go_on_on_the_other(tmp_path) -> None:
    """kill -9 of the ASGI server a client streams from: it resumes on the other server
    with Last-Event-ID and receives exactly the rest; the run (on a worker) goes on."""
    marker = f"SERVER-{secrets.token_hex(3)}"
    with running_stack(mode="team", servers=2, extra_env=FAST_SWEEP) as stack:
        stack.script(rules=[slow_answer(f"{marker}: long"), quick_answer(marker, "Again.")])
        async with Browser(stack.base_url) as browser:
            await browser.login()
            other = browser.on(stack.server_urls["daphne2"])
            conversation_id = await browser.new_conversation()
            async with EventStream(browser, conversation_id) as stream, other:
                await browser.send(conversation_id, f"{marker}: long")
                await words_shown(stream, 10, stack)
                stream.move_to(other)
                stack.daphne.kill()
                await run_ended(stream, 1, stack)
                # The page, reconnecting to the other server after what it had, is complete.
                seen = stream.events[-1][0] - 1
                async with Frames(other.socket(conversation_id, after=seen)) as frames:
                    await frames.wait(lambda f: "word119" in f, timeout=20, what="the answer")
                await other.send(conversation_id, f"{marker}: again")
                await run_ended(stream, 2, stack)

        assert stream.drops >= 1
        assert stream.runs()[0][-1][1] == "done"
        assert_consistent(stack, conversation_id, [f"{marker}: long", f"{marker}: again"], stream)


async def test_a_postgresql_restart_mid_run_loses_nothing(tmp_path) -> None:
    """The database restarts (fast shutdown) while an answer streams: the run finishes or
    ends honestly, nothing stored is lost, the conversation goes on. While it is down, a
    message post and an API read answer a clear 503 (nothing half-saved)."""
    marker = f"POSTGRES-{secrets.token_hex(3)}"
    with running_stack(mode="team", private_postgres=True, extra_env=FAST_SWEEP) as stack:
        stack.script(rules=[slow_answer(f"{marker}: long"), quick_answer(marker, "Again.")])
        async with Browser(stack.base_url) as browser:
            await browser.login()
            conversation_id = await browser.new_conversation()
            async with EventStream(browser, conversation_id) as stream:
                await browser.send(conversation_id, f"{marker}: long")
                await words_shown(stream, 10, stack)
                stack.postgres.stop()
                down = await browser.post(
                    f"/c/{conversation_id}/messages/", {"content": f"{marker}: lost?"}
                )
                assert down.status_code == 503 and down.headers["HX-Reswap"] == "none"
                assert "Nothing you typed was lost" in down.text  # and the composer keeps it
                api = await browser.http.get(f"/api/conversations/{conversation_id}")
                assert api.status_code == 503 and "briefly unavailable" in api.json()["error"]
                stack.restart_postgres()
                await run_ended(stream, 1, stack)
                await browser.send(conversation_id, f"{marker}: again")
                await run_ended(stream, 2, stack)

        assert_consistent(stack, conversation_id, [f"{marker}: long", f"{marker}: again"], stream)
        assert stream.runs()[-1][-1][2]["answer"] == "Again."


async def test_an_embedded_server_killed_and_restarted_reports_the_run(tmp_path) -> None:
    """Embedded mode runs answers in the server: kill -9 it mid-answer and start it again.
    The restarted server reports the run interrupted within the stale time (no page load
    needed), keeps what reached the log, and the client's ids go on increasing."""
    marker = f"EMBEDDED-{secrets.token_hex(3)}"
    with running_stack(mode="embedded", extra_env=FAST_SWEEP) as stack:
        stack.script(rules=[slow_answer(f"{marker}: long"), quick_answer(marker, "Again.")])
        async with Browser(stack.base_url) as browser:
            await browser.login()
            conversation_id = await browser.new_conversation()
            async with EventStream(browser, conversation_id) as stream:
                await browser.send(conversation_id, f"{marker}: long")
                await words_shown(stream, 10, stack)
                stack.daphne.kill()
                killed_at = time.monotonic()
                stack.restart_server()
                await run_ended(stream, 1, stack, timeout=STALE_SECONDS + 20)
                reported_after = time.monotonic() - killed_at
                await browser.send(conversation_id, f"{marker}: again")
                await run_ended(stream, 2, stack)

        report = stream.runs()[0][-1]
        assert report[1] == "error" and "interrupted" in report[2]["message"]
        assert reported_after < STALE_SECONDS + 15
        assert_consistent(stack, conversation_id, [f"{marker}: long", f"{marker}: again"], stream)
