"""Restarts mid-run (issue 44): SIGTERM to each kind of process while an answer streams,
over real processes (daphne, Celery workers, Redis, PostgreSQL or SQLite, the scripted
LLM). No user message is lost and no answer is doubled.

The scripted stream pauses after a few words until the test releases it
(``pause_after``/``resume_on``), so "mid-run" is a point the test chose, not a guess at
timing: the signal goes out while the run waits on the LLM, and the test releases the
stream (or not) once the process said it is stopping.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from core.graceful import RESTART_CLOSE_CODE
from tests.integration.observers import EventStream, assert_consistent, shown_answer
from tests.integration.runs import run_ends
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

GRACE = 8.0  # AGENTSITE_SHUTDOWN_GRACE_SECONDS of the stacks here
WORDS = 40
PAUSE_AFTER = 10
ANSWER = "".join(f"word{i} " for i in range(WORDS))
STACK_ENV = {
    "AGENTSITE_SHUTDOWN_GRACE_SECONDS": str(GRACE),
    "AGENTSITE_RUN_STALE_SECONDS": "30",  # the sweep must not be what ends these runs
    "AGENTSITE_RUN_SWEEP_SECONDS": "0.5",
    "AGENTSITE_RUN_HEARTBEAT_SECONDS": "0.5",
}
STOPPING = "SIGTERM: stopped listening"  # a server's log line once it is stopping


def paused_answer(gate: str, *, delay: float = 0.02) -> dict[str, Any]:
    """A streamed answer of WORDS words that waits after PAUSE_AFTER of them until the
    test releases ``gate``."""
    chunks = [f"word{i} " for i in range(WORDS)]
    return {"chunks": chunks, "chunk_delay": delay, "pause_after": PAUSE_AFTER, "resume_on": gate}


def sigterm(process: Process) -> float:
    """Send SIGTERM to the process (group); the moment it was sent."""
    os.killpg(process.pid, signal.SIGTERM)
    return time.monotonic()


async def exit_after(process: Process, sent_at: float, *, timeout: float) -> float:
    """Seconds from the SIGTERM to the process's exit (it must exit within ``timeout``)."""
    await asyncio.to_thread(process.popen.wait, timeout)
    return time.monotonic() - sent_at


async def words_streamed(stream: EventStream, stack: Stack, count: int = PAUSE_AFTER) -> None:
    await async_wait_for(
        lambda: stream.answer().count("word") >= count,
        timeout=30,
        what=f"{count} answer words",
        detail=stack.logs,
    )


async def ended(stream: EventStream, stack: Stack, count: int = 1, timeout: float = 60) -> None:
    await async_wait_for(
        lambda: stream.ended(count), timeout=timeout, what=f"{count} runs to end", detail=stack.logs
    )


def executing(stack: Stack, run_id: int) -> Process:
    """The worker that logged the run's start last (a handed-back run starts twice)."""
    started = [w for w in stack.workers if f"run {run_id} started" in w.text()]
    assert len(started) == 1, [w.name for w in started]
    return started[0]


def stored(stack: Stack, conversation_id: int) -> list[tuple[str, str, int | None]]:
    """The conversation's messages: (role, content, run id), in order."""
    return [
        (role, content, run_id)
        for role, content, run_id in stack.query(
            "SELECT role, content, run_id FROM conversations_message "
            "WHERE conversation_id = %s ORDER BY seq",
            conversation_id,
        )
    ]


def every_run_ended(stack: Stack, conversation_id: int) -> int | None:
    """The number of the conversation's runs once none is queued or running."""
    statuses = stack.query(
        "SELECT status FROM conversations_run WHERE conversation_id = %s", conversation_id
    )
    return None if any(s in ("queued", "running") for (s,) in statuses) else len(statuses)


# ------------------------------------------------------------------------- servers


@pytest.fixture
def two_servers() -> Iterator[Stack]:
    with running_stack(mode="team", servers=2, workers=1, extra_env=STACK_ENV) as stack:
        yield stack


async def test_a_server_stopping_sends_its_clients_to_the_other_one(two_servers: Stack) -> None:
    """SIGTERM to the server a page's websocket and an SSE client watch a run on: the socket
    closes with the restart code (4012: 1012, service restart), the page reconnects to the
    other server and shows the answer once, the SSE client resumes there with Last-Event-ID
    and misses nothing; the server exits within the grace period while the run goes on in
    the worker."""
    stack, gate = two_servers, f"server-{secrets.token_hex(3)}"
    question = f"SERVER-STOP-{gate}: talk"
    stack.script(rules=[{"contains": question, "responses": [paused_answer(gate)]}])
    server_a = stack.processes["daphne"]
    async with Browser(stack.base_url) as browser:
        await browser.login()
        other = browser.on(stack.server_urls["daphne2"])
        conversation_id = await browser.new_conversation()
        page = Frames(browser.socket(conversation_id), describe=stack.logs)
        async with EventStream(browser, conversation_id) as stream, other, page as frames:
            run_id = run_id_of(await browser.send(conversation_id, question))
            await words_streamed(stream, stack)
            stream.move_to(other)  # where a proxy sends it once this server stops listening
            sent_at = sigterm(server_a)
            await async_wait_for(
                lambda: frames.ws.close_code is not None,
                timeout=GRACE,
                what="the websocket to close",
                detail=stack.logs,
            )
            closed_after = time.monotonic() - sent_at
            close_code = frames.ws.close_code
            exited_after = await exit_after(server_a, sent_at, timeout=GRACE + 2)
            # The page's socket, reconnected to the other server with the URL it was
            # loaded with (?after= the page's last event: none yet).
            async with Frames(other.socket(conversation_id), describe=stack.logs) as again:
                reconnected_after = time.monotonic() - sent_at
                stack.release(gate)
                await again.wait(
                    lambda f: shown_answer(f, run_id) is not None,
                    timeout=30,
                    what="the finished answer after the reconnect",
                )
                await ended(stream, stack)
                shown = [a for a in (shown_answer(f, run_id) for f in again.frames) if a]

    print(
        f"\nserver SIGTERM: websocket closed ({close_code}) after {closed_after:.2f}s, "
        f"exited after {exited_after:.2f}s (grace {GRACE:.0f}s), page reconnected after "
        f"{reconnected_after:.2f}s; SSE resumed {stream.drops} time(s)"
    )
    assert close_code == RESTART_CLOSE_CODE  # 1012 where daphne can send it (core/graceful.py)
    assert exited_after < GRACE
    assert server_a.popen.returncode == 0, server_a.tail()
    assert stream.drops >= 1  # the stream ended and resumed on the other server
    assert shown == [ANSWER.strip()]  # exactly once, the whole answer
    assert_consistent(stack, conversation_id, [question], stream)
    [(answer,)] = stack.query(
        "SELECT content FROM conversations_message WHERE run_id = %s AND role = 'assistant'",
        run_id,
    )
    assert answer == ANSWER


# ------------------------------------------------------------------------- workers


@pytest.fixture
def two_workers() -> Iterator[Stack]:
    with running_stack(mode="team", workers=2, extra_env=STACK_ENV) as stack:
        yield stack


async def test_a_worker_stopping_finishes_its_run_within_the_grace_period(
    two_workers: Stack,
) -> None:
    """SIGTERM to the worker writing an answer, which then goes on: it finishes there,
    and the worker exits once it has, within the grace period."""
    stack, gate = two_workers, f"finish-{secrets.token_hex(3)}"
    question = f"WORKER-FINISH-{gate}: talk"
    stack.script(rules=[{"contains": question, "responses": [paused_answer(gate)]}])
    async with Browser(stack.base_url) as browser:
        await browser.login()
        conversation_id = await browser.new_conversation()
        async with EventStream(browser, conversation_id) as stream:
            run_id = run_id_of(await browser.send(conversation_id, question))
            await words_streamed(stream, stack)
            worker = executing(stack, run_id)
            sent_at = sigterm(worker)
            await async_wait_for(
                lambda: "Warm shutdown" in worker.text(),
                timeout=GRACE,
                what="the worker's warm shutdown",
                detail=stack.logs,
            )
            stack.release(gate)
            await ended(stream, stack)
            exited_after = await exit_after(worker, sent_at, timeout=GRACE + 5)

    print(f"\nworker SIGTERM, run finished in the grace period: exited after {exited_after:.2f}s")
    assert exited_after < GRACE
    assert not [e for e in stream.events if e[1] == "handover"]
    assert stream.events[-1][2]["answer"] == ANSWER
    assert_consistent(stack, conversation_id, [question], stream)


async def test_a_worker_stopping_hands_its_run_to_another_with_the_follow_up(
    two_workers: Stack,
) -> None:
    """SIGTERM to the worker writing an answer that does not end within the grace period:
    the run goes back to the queue and the other worker goes on with it (from its question:
    it had no completed step), taking the follow-up sent meanwhile. The conversation holds
    each user message once and one answer per run, the one the client saw."""
    stack, gate = two_workers, f"handover-{secrets.token_hex(3)}"
    question = f"WORKER-HANDOVER-{gate}: talk"
    followup = f"WORKER-HANDOVER-{gate}: and one more thing"
    elsewhere = "Answered by the other worker."
    stack.script(
        rules=[
            {"contains": followup, "in": "any", "responses": [elsewhere, elsewhere]},
            {"contains": question, "responses": [paused_answer(gate), elsewhere]},
        ]
    )
    async with Browser(stack.base_url) as browser:
        await browser.login()
        conversation_id = await browser.new_conversation()
        async with EventStream(browser, conversation_id) as stream:
            run_id = run_id_of(await browser.send(conversation_id, question))
            await words_streamed(stream, stack)
            await browser.send(conversation_id, followup)  # joins the run as a follow-up
            worker = executing(stack, run_id)
            sent_at = sigterm(worker)
            exited_after = await exit_after(worker, sent_at, timeout=GRACE + 5)
            handed = [e for e in stream.events if e[1] == "handover"]
            runs = await async_wait_for(
                lambda: every_run_ended(stack, conversation_id),
                timeout=60,
                what="every run of the conversation to end",
                detail=stack.logs,
            )
            await ended(stream, stack, count=runs)  # seen by the client too

    others = [w for w in stack.workers if w is not worker]
    print(f"\nworker SIGTERM, run handed over: exited after {exited_after:.2f}s")
    assert exited_after < GRACE
    assert handed and handed[0][2]["branch"]["run_id"] == run_id, stream.events[-5:]
    assert f"run {run_id} started" in others[0].text()
    assert (await run_ends(stack, run_id))["status"] == "succeeded"
    # The question and the follow-up once each; the first answer once (the words the
    # stopped worker streamed were taken back), whichever run answered the follow-up.
    messages = stored(stack, conversation_id)
    assert [c for role, c, _r in messages if role == "user"] == [question, followup]
    answers = [(c, r) for role, c, r in messages if role == "assistant"]
    assert [c for c, r in answers if r == run_id] == [elsewhere]
    assert all(c == elsewhere for c, _r in answers)
    assert_consistent(stack, conversation_id, [question, followup], stream)
    # The other worker went on without a new user turn: the question is asked once.
    asked = [r["body"]["messages"] for r in stack.llm_requests()]
    resumed = [messages for messages in asked if question in str(messages)][-1]
    assert [m["content"] for m in resumed if m["role"] == "user"].count(question) == 1


# ------------------------------------------------------------------------ embedded


@pytest.fixture
def embedded() -> Iterator[Stack]:
    with running_stack(mode="embedded", extra_env=STACK_ENV) as stack:
        yield stack


async def test_an_embedded_server_stopping_finishes_or_ends_its_run(embedded: Stack) -> None:
    """Embedded mode: the server executes the runs. SIGTERM while a run waits on the LLM:
    when the run can finish within the grace period it does, before the exit, seen live;
    when it cannot, it ends saying the server restarted, with what it wrote kept, and
    after the restart the page shows that and Retry answers."""
    stack = embedded
    first_gate, second_gate = f"e1-{secrets.token_hex(3)}", f"e2-{secrets.token_hex(3)}"
    finishing, cut = f"EMBEDDED-FINISH-{first_gate}", f"EMBEDDED-CUT-{second_gate}"
    retried = "Answered after the restart."
    stack.script(
        rules=[
            {"contains": finishing, "responses": [paused_answer(first_gate)]},
            {"contains": cut, "responses": [paused_answer(second_gate), retried]},
        ]
    )
    timings: dict[str, float] = {}
    async with Browser(stack.base_url) as browser:
        await browser.login()
        conversation_id = await browser.new_conversation()
        # 1. The run can finish within the grace period: it does.
        async with EventStream(browser, conversation_id) as stream:
            first = run_id_of(await browser.send(conversation_id, finishing))
            await words_streamed(stream, stack)
            sent_at = sigterm(stack.daphne)
            await async_wait_for(
                lambda: STOPPING in stack.daphne.text(), timeout=GRACE, what="the server stopping"
            )
            stack.release(first_gate)
            timings["finished"] = await exit_after(stack.daphne, sent_at, timeout=GRACE + 2)
        assert stream.runs()[0][-1][1] == "done"
        assert stream.runs()[0][-1][2]["answer"] == ANSWER
        assert stack.query("SELECT status FROM conversations_run WHERE id = %s", first) == [
            ("succeeded",)
        ]

        # 2. It cannot: it ends saying so, before the exit.
        stack.restart_server()
        async with EventStream(browser, conversation_id, after=stream.events[-1][0]) as stream:
            second = run_id_of(await browser.send(conversation_id, cut))
            await words_streamed(stream, stack)
            sent_at = sigterm(stack.daphne)
            await ended(stream, stack, timeout=GRACE + 2)
            timings["stopped"] = await exit_after(stack.daphne, sent_at, timeout=GRACE + 2)
        report = stream.runs()[0][-1]
        assert report[1] == "error" and "the server restarted" in report[2]["message"]
        status, error = stack.query("SELECT status, error FROM conversations_run WHERE id = %s",
                                    second)[0]  # fmt: skip
        assert status == "failed" and "Retry" in error

        # After the restart the page says so and Retry answers.
        stack.restart_server()
        page = await browser.http.get(f"/c/{conversation_id}/")
        assert page.status_code == 200
        assert "the server restarted" in page.text and f"/runs/{second}/retry/" in page.text
        async with EventStream(browser, conversation_id, after=stream.events[-1][0]) as stream:
            again = await browser.post(f"/runs/{second}/retry/")
            assert again.status_code == 200, again.text[:300]
            await ended(stream, stack)
        assert stream.runs()[-1][-1][2]["answer"] == retried

    print(
        f"\nembedded SIGTERM: run finished and exited after {timings['finished']:.2f}s; "
        f"run stopped and exited after {timings['stopped']:.2f}s (grace {GRACE:.0f}s)"
    )
    assert timings["finished"] < GRACE and timings["stopped"] < GRACE
    messages = stored(stack, conversation_id)
    assert [c for role, c, _r in messages if role == "user"] == [finishing, cut]
    kept = [c for role, c, r in messages if role == "assistant" and r == second]
    assert kept and ANSWER.startswith(kept[0]) and kept[0].count("word") >= PAUSE_AFTER
