"""Faults injected into a real team-mode stack on loopback (daphne, a Celery worker,
Redis, PostgreSQL, the scripted LLM): what a user saw survives, run states stay honest,
event numbers only increase."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.observers import EventStream, assert_consistent
from tests.integration.stack import (
    Browser,
    Frames,
    Process,
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
            # The worker that logged the run's start runs it.
            running = [w for w in stack.workers if f"run {first} started" in w.text()]
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
    The restarted server reports the run interrupted at once, long before the stale
    period (here two minutes) would have passed: no process but it could be running it.
    It keeps what reached the log, and the client's ids go on increasing."""
    marker = f"EMBEDDED-{secrets.token_hex(3)}"
    patient = {**FAST_SWEEP, "AGENTSITE_RUN_STALE_SECONDS": "120"}
    with running_stack(mode="embedded", extra_env=patient) as stack:
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
                restarted_after = time.monotonic() - killed_at
                await run_ended(stream, 1, stack, timeout=60)
                reported_after = time.monotonic() - killed_at
                await browser.send(conversation_id, f"{marker}: again")
                await run_ended(stream, 2, stack)

        print(f"\nembedded crash: restarted after {restarted_after:.1f}s, reported after")
        print(f"{reported_after:.1f}s (the stale period is 120s)")
        report = stream.runs()[0][-1]
        assert report[1] == "error" and "interrupted" in report[2]["message"]
        assert_consistent(stack, conversation_id, [f"{marker}: long", f"{marker}: again"], stream)


# ------------------------------------------------------- issue 42: owners, restarts, disk


def outage_lines(process: Process, what: str = "the database") -> tuple[int, int]:
    """How many times ``process`` logged the start and the end of an outage of ``what``."""
    text = process.text()
    return text.count(f"{what} is not answering"), text.count(f"{what} answers again")


async def send_until_taken(browser: Browser, conversation_id: int, content: str) -> None:
    """Post a message the way a user would just after an outage: a 503 ("try again in a
    moment": the server's connection pool is still reconnecting) is tried again, within
    bounds; the message is then saved once."""
    deadline = time.monotonic() + 30
    while True:
        response = await browser.post(f"/c/{conversation_id}/messages/", {"content": content})
        if response.status_code != 503 or time.monotonic() > deadline:
            assert response.status_code == 200, (response.status_code, response.text[:300])
            return
        await asyncio.sleep(0.5)


@contextlib.contextmanager
def paused(process: Process) -> Iterator[None]:
    """SIGSTOP the process for the block (it takes no task meanwhile), SIGCONT after."""
    os.kill(process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(process.pid, signal.SIGCONT)


async def test_runs_a_worker_took_during_a_postgresql_restart_start_when_it_is_back(tmp_path):
    """The worker takes two runs while PostgreSQL is down: it keeps them (queued, owned),
    and both are answered once the database is back; the restart costs the worker one
    warning, not one per failed call. Then, with the workers' connections killed by a
    second restart, eight messages at once are all answered."""
    marker = f"PGOWNED-{secrets.token_hex(3)}"
    with running_stack(mode="team", private_postgres=True, extra_env=FAST_SWEEP) as stack:
        stack.script(rules=[{"contains": marker, "in": "any", "response": "Back."}])
        assert stack.worker is not None
        async with Browser(stack.base_url) as browser:
            await browser.login()
            first, second = await browser.new_conversation(), await browser.new_conversation()
            async with EventStream(browser, first) as one, EventStream(browser, second) as two:
                with paused(stack.worker):
                    await browser.send(first, f"{marker}: one")
                    await browser.send(second, f"{marker}: two")
                    stack.postgres.stop()
                    down_at = time.monotonic()
                await async_wait_for(
                    lambda: outage_lines(stack.worker)[0] >= 1,
                    timeout=30,
                    what="the worker to meet the outage",
                    detail=stack.logs,
                )
                stack.restart_postgres()
                back_at = time.monotonic()
                await run_ended(one, 1, stack)
                await run_ended(two, 1, stack)
                answered_after = time.monotonic() - back_at
            assert outage_lines(stack.worker) == (1, 1), stack.worker.tail(80)

            # Every kept connection dies with a second restart; nobody waits this time.
            stack.postgres.stop()
            stack.restart_postgres()
            many = [await browser.new_conversation() for _ in range(8)]
            streams = [EventStream(browser, c) for c in many]
            for stream in streams:
                await stream.__aenter__()
            try:
                await asyncio.gather(
                    *(send_until_taken(browser, c, f"{marker}: {c}") for c in many)
                )
                for stream in streams:
                    await run_ended(stream, 1, stack)
            finally:
                for stream in streams:
                    await stream.__aexit__(None, None, None)

        print(f"\nqueued through a restart: answered {answered_after:.1f}s after the database")
        print(f"was back (it was down {back_at - down_at:.1f}s)")
        statuses = stack.query(
            "SELECT status, error, count(*) FROM conversations_run GROUP BY status, error"
        )
        assert statuses == [("succeeded", "", 10)], statuses
        assert_consistent(stack, first, [f"{marker}: one"], one)
        assert_consistent(stack, second, [f"{marker}: two"], two)


async def test_a_queued_run_no_worker_takes_is_reported_and_its_follow_up_released(tmp_path):
    """The only worker is stopped: the queued run has no owner. Within the stale period it
    is reported on the event stream and the page, the follow-up sent to it becomes a plain
    message shown as unanswered, and the conversation goes on once a worker is back."""
    marker = f"NOWORKER-{secrets.token_hex(3)}"
    with running_stack(mode="team", extra_env=FAST_SWEEP) as stack:
        stack.script(rules=[quick_answer(marker, "Here now.")])
        assert stack.worker is not None
        async with Browser(stack.base_url) as browser:
            await browser.login()
            conversation_id = await browser.new_conversation()
            page = Frames(browser.socket(conversation_id), describe=stack.logs)
            async with EventStream(browser, conversation_id) as stream, page as frames:
                with paused(stack.worker):
                    stranded = run_id_of(await browser.send(conversation_id, f"{marker}: first"))
                    followup = await browser.send(conversation_id, f"{marker}: and this")
                    assert "the agent will read it" in followup.text
                    sent_at = time.monotonic()
                    await run_ended(stream, 1, stack, timeout=STALE_SECONDS + 20)
                    reported_after = time.monotonic() - sent_at
                    shown = await frames.wait(
                        lambda f: "never started" in f, timeout=10, what="the report on the page"
                    )
                # The worker takes the stale task now: the run is over, nothing doubles.
                await browser.send(conversation_id, f"{marker}: again")
                await run_ended(stream, 2, stack)

        print(f"\nno worker: reported {reported_after:.1f}s after the message", end="")
        print(f" (stale period: {STALE_SECONDS}s)")
        channels = [channel for _id, channel, _p in stream.events]
        report = next(p for _id, c, p in stream.events if c == "error")
        unanswered = next(p for _id, c, p in stream.events if c == "unanswered")
        assert "no worker took it" in report["message"] and "Retry" in report["message"]
        assert "no worker took it" in shown
        assert [m["content"] for m in unanswered["messages"]] == [f"{marker}: and this"]
        assert channels.count("done") == 1 and stream.runs()[-1][-1][2]["answer"] == "Here now."
        assert reported_after < STALE_SECONDS + 15
        [(status,)] = stack.query("SELECT status FROM conversations_run WHERE id = %s", stranded)
        assert status == "failed"
        kinds = stack.query(
            "SELECT content, kind FROM conversations_message WHERE conversation_id = %s "
            "AND role = 'user' ORDER BY seq",
            conversation_id,
        )
        assert [kind for _c, kind in kinds] == ["chat", "chat", "chat"]


async def events_until_closed(
    browser: Browser, conversation_id: int, events: list[tuple[str, dict]]
) -> None:
    """A client without ``?follow=1``: collects (channel, payload) into ``events`` until
    the server ends the stream."""
    path = f"/api/conversations/{conversation_id}/events"
    async with browser.http.stream("GET", path, timeout=60) as response:
        channel = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                channel = line[7:]
            elif line.startswith("data: "):
                events.append((channel, json.loads(line[6:])))


@contextlib.contextmanager
def small_disk(path: Path, megabytes: int) -> Iterator[Path]:
    """A filesystem of its own at ``path`` (a tmpfs), so a test can fill it up."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem to fill up needs root (CI runs as root)")
    path.mkdir(parents=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m,mode=0700", "tmpfs", str(path)],
        check=True,
    )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill_up(directory: Path) -> Path:
    """Write a file into ``directory`` until its filesystem has no space left."""
    filler = directory / "filler"
    chunk = b"\0" * (1 << 20)
    with filler.open("wb") as out:
        try:
            while True:
                out.write(chunk)
                out.flush()
        except OSError:
            pass
    return filler


def truncate_wal(database: Path) -> None:
    """Checkpoint SQLite's write-ahead log and truncate it, so the next write must grow
    it (writes into a WAL file's old space would succeed on a full disk)."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(database, timeout=10)) as conn:
        for _attempt in range(100):
            busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                return
            time.sleep(0.05)
    raise AssertionError("could not truncate the write-ahead log")


async def test_an_answer_ending_on_a_full_disk_is_shown_then_saved(tmp_path):
    """The disk fills up while an answer streams (embedded mode, SQLite). Its end cannot
    be written: the page and the event stream show the whole answer at once, marked as
    not saved yet, and a message posted meanwhile is refused in plain words. Once space
    is freed the write goes through, a ``saved`` event clears the mark, and the database
    holds exactly what was shown."""
    marker = f"DISKFULL-{secrets.token_hex(3)}"
    words = [f"word{i} " for i in range(60)]
    work = tmp_path / "stack"
    work.mkdir()
    with small_disk(work / "var", megabytes=48), running_stack(mode="embedded", work=work) as stack:
        stack.script(
            rules=[
                {
                    "contains": marker,
                    "in": "any",
                    "responses": [{"chunks": words, "chunk_delay": 0.02, "after_release": "go"}],
                }
            ]
        )
        async with Browser(stack.base_url) as browser:
            await browser.login()
            conversation_id = await browser.new_conversation()
            page = Frames(browser.socket(conversation_id), describe=stack.logs)
            async with EventStream(browser, conversation_id) as stream, page as frames:
                run_id = run_id_of(await browser.send(conversation_id, f"{marker}: write"))
                await async_wait_for(
                    lambda: stack.llm_state()["requests"] >= 1, timeout=30, what="the LLM call"
                )
                truncate_wal(work / "var" / "db.sqlite3")
                filler = fill_up(work / "var")
                httpx.post(f"{stack.llm_base}/_release", json={"name": "go"}, trust_env=False)
                released_at = time.monotonic()
                ended = await async_wait_for(
                    lambda: next((e for e in stream.events if e[1] == "done"), None),
                    timeout=30,
                    what="the end of the answer on the event stream",
                    detail=stack.logs,
                )
                shown_after = time.monotonic() - released_at
                await frames.wait(
                    lambda f: "Not saved yet" in f and "disk is full" in f,
                    timeout=10,
                    what="the not-saved mark on the page",
                )
                [(status,)] = stack.query(
                    "SELECT status FROM conversations_run WHERE id = %s", run_id
                )
                refused = await browser.post(
                    f"/c/{conversation_id}/messages/", {"content": f"{marker}: more"}
                )
                # A client without ?follow=1, joining now, hears the end (re-sent for
                # readers who joined since) and stays until it is stored.
                late_events: list[tuple[str, dict]] = []
                late = asyncio.ensure_future(
                    events_until_closed(browser, conversation_id, late_events)
                )
                await async_wait_for(
                    lambda: any(channel == "done" for channel, _p in late_events),
                    timeout=20,
                    what="the unsaved end for a client who joined late",
                )
                filler.unlink()
                freed_at = time.monotonic()
                await async_wait_for(
                    lambda: any(e[1] == "saved" for e in stream.events),
                    timeout=30,
                    what="the saved event",
                    detail=stack.logs,
                )
                saved_after = time.monotonic() - freed_at
                await asyncio.wait_for(late, timeout=30)  # the stream ended by itself

        print(f"\ndisk full: the end shown {shown_after:.2f}s after the answer was released,")
        print(f"saved {saved_after:.2f}s after space was freed")
        assert "disk is full" in ended[2]["unsaved"] and ended[2]["answer"] == "".join(words)
        assert status == "running"  # not written yet, and not taken for finished
        assert refused.status_code == 503 and "disk is full" in refused.text
        [(final, content, incomplete)] = stack.query(
            "SELECT r.status, m.content, m.incomplete FROM conversations_run r "
            "JOIN conversations_message m ON m.run_id = r.id AND m.role = 'assistant' "
            "WHERE r.id = %s",
            run_id,
        )
        assert (final, content, incomplete) == ("succeeded", "".join(words), 0)
        logged = stack.query(
            "SELECT channel, payload FROM conversations_runevent WHERE run_id = %s "
            "AND channel = 'done'",
            run_id,
        )
        assert len(logged) == 1 and "unsaved" not in logged[0][1]  # the log has it clean
        late_channels = [channel for channel, _payload in late_events]
        assert late_channels[-1] == "saved"
        assert next(p for c, p in late_events if c == "done")["unsaved"]
        assert_consistent(stack, conversation_id, [f"{marker}: write"], stream)
