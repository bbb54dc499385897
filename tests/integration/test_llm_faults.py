"""LLM faults end to end on a team-mode stack: the scripted provider fails the way real
ones do (5xx, 429 with Retry-After, a stream cut or stalled mid-answer, an answer that
never ends), and each run ends in an honest state, in plain words, with what was shown
kept, and the client's view equal to what is stored."""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import os
import secrets
from collections.abc import AsyncIterator, Iterator

import pytest

from engine.agent import BROKEN_ANSWER
from tests.integration.observers import EventStream, assert_consistent
from tests.integration.stack import Browser, Frames, Stack, async_wait_for, running_stack

pytestmark = pytest.mark.integration

READ_TIMEOUT = 2  # the provider's timeout: a stream silent this long is cut
OUTPUT_CAP = 60  # tokens: the model's max output
DEADLINE = 8  # seconds a run may take

LIMITS = f"""
from llms.models import LLMModel, Provider
Provider.objects.filter(name="scripted").update(timeout={READ_TIMEOUT})
LLMModel.objects.filter(provider__name="scripted").update(max_output_tokens={OUTPUT_CAP})
"""


@pytest.fixture(scope="module")
def limited_stack() -> Iterator[Stack]:
    env = {"AGENTSITE_RUN_DEADLINE_SECONDS": str(DEADLINE)}
    with running_stack(mode="team", extra_env=env, setup_extra=LIMITS) as stack:
        yield stack


@pytest.fixture
async def browser(limited_stack: Stack) -> AsyncIterator[Browser]:
    async with Browser(limited_stack.base_url) as client:
        await client.login()
        yield client


async def ask(
    stack: Stack, browser: Browser, responses: list, *, page_shows: str = ""
) -> tuple[EventStream, dict]:
    """Send one message whose LLM calls get ``responses`` (in order); wait for the run's
    end; check the conversation's invariants. Returns the stream and the run's row.

    With ``page_shows``, the conversation's websocket (what an open page receives) is read
    too, until a frame shows that text: ``row["frame"]`` is that frame and
    ``row["frame_at"]`` when it arrived (``time.monotonic()``); ``row["questions"]`` are the
    LLM requests the question made, as the scripted server recorded them."""
    question = f"FAULT-{secrets.token_hex(4)}"
    stack.script(rules=[{"contains": question, "in": "any", "responses": responses}])
    conversation_id = await browser.new_conversation()
    row: dict = {}
    async with contextlib.AsyncExitStack() as watching:
        stream = await watching.enter_async_context(EventStream(browser, conversation_id))
        if page_shows:
            socket = Frames(browser.socket(conversation_id), describe=stack.logs)
            frames = await watching.enter_async_context(socket)
        await browser.send(conversation_id, question)
        await async_wait_for(
            lambda: stream.ended(), timeout=DEADLINE + 20, what="the run's end", detail=stack.logs
        )
        if page_shows:
            row["frame"] = await frames.wait(
                lambda f: page_shows in f, timeout=10, what=f"showing {page_shows!r}"
            )
            row["frame_at"] = frames.received_at[frames.frames.index(row["frame"])]
    assert_consistent(stack, conversation_id, [question], stream)
    [(run_id, status, error, detail)] = stack.query(
        "SELECT id, status, error, error_detail FROM conversations_run WHERE conversation_id = %s",
        conversation_id,
    )
    page = (await browser.http.get(f"/c/{conversation_id}/")).text
    row.update(id=run_id, status=status, error=error, detail=detail, page=page)
    row["questions"] = [r for r in stack.llm_requests() if question in json.dumps(r["body"])]
    assert stack.llm_base not in error and "Error: Error" not in page
    return stream, row


async def test_server_errors_fail_the_run_in_plain_words(limited_stack: Stack, browser) -> None:
    stream, run = await ask(limited_stack, browser, [{"status": 500}] * 8)

    assert run["status"] == "failed"
    assert "model" in run["error"].lower() and "500" not in run["error"]
    assert "500" in run["detail"]  # the technical detail, for the admin's run log
    assert html.escape(run["error"]) in run["page"] and "/retry/" in run["page"]


async def test_a_rate_limit_is_waited_out(limited_stack: Stack, browser) -> None:
    limited = {"status": 429, "headers": {"Retry-After": "1"}}
    stream, run = await ask(limited_stack, browser, [limited, "Worth the wait."])

    assert run["status"] == "succeeded"
    assert stream.runs()[-1][-1][2]["answer"] == "Worth the wait."


async def test_a_stream_cut_mid_answer_is_kept_incomplete(limited_stack: Stack, browser) -> None:
    cut = {"chunks": ["The first ", "part ", "and ", "never the rest"], "cut_after": 3}
    stream, run = await ask(limited_stack, browser, [cut])

    assert run["status"] == "incomplete"
    assert stream.runs()[-1][-1][2]["answer"] == "The first part and "
    assert "/retry/" in run["page"]


async def test_a_stream_that_ends_cleanly_too_early_is_kept_incomplete(
    limited_stack: Stack, browser
) -> None:
    """50 of 1000 tokens, then the body ends cleanly: no finish_reason, no [DONE]. Not a
    complete answer: kept as shown, marked incomplete, with the reason in plain words on
    the open page, the SSE stream and a page load."""
    words = [f"w{i} " for i in range(50)]  # under the output cap (60 tokens)
    early = {"chunks": words, "finish_reason": None, "done": False}
    reason = html.escape(BROKEN_ANSWER)
    stream, run = await ask(limited_stack, browser, [early], page_shows=reason)

    assert run["status"] == "incomplete" and run["error"] == BROKEN_ANSWER
    assert stream.answer() == "".join(words)  # what streamed to the SSE client
    done = stream.runs()[-1][-1][2]
    assert (done["answer"], done["status"]) == ("".join(words), "incomplete")
    assert done["reason"] == BROKEN_ANSWER
    assert "w49" in run["frame"] and "/retry/" in run["frame"]  # the open page
    assert reason in run["page"] and "/retry/" in run["page"]  # a page load
    [(content, incomplete)] = limited_stack.query(
        "SELECT m.content, m.incomplete FROM conversations_message m "
        "JOIN conversations_run r ON m.run_id = r.id "
        "WHERE m.role = 'assistant' AND r.id = %s",
        run["id"],
    )
    assert content == "".join(words) and incomplete
    [request] = run["questions"]  # one request: text had shown, so no silent retry
    ended = request["ended"]
    assert ended is not None  # the body did end cleanly
    print(
        f"\nclean early end: the open page showed the run incomplete "
        f"{(run['frame_at'] - ended) * 1000:.0f} ms after the stream's body ended"
    )


async def test_a_stalled_stream_is_cut_at_the_timeout(limited_stack: Stack, browser) -> None:
    stalled = {"chunks": ["Half ", "of it"], "hang": 60}
    stream, run = await ask(limited_stack, browser, [stalled])

    assert run["status"] == "incomplete"
    assert stream.runs()[-1][-1][2]["answer"] == "Half "


async def test_an_endless_answer_stops_at_the_output_cap(limited_stack: Stack, browser) -> None:
    endless = {"chunks": ["word "] * 5000}
    stream, run = await ask(limited_stack, browser, [endless])

    assert run["status"] == "incomplete" and "length limit" in run["error"]
    assert 0 < len(stream.runs()[-1][-1][2]["answer"]) <= OUTPUT_CAP * 4


async def test_a_slow_endless_answer_stops_at_the_deadline(limited_stack: Stack, browser) -> None:
    slow = {"chunks": ["w "] * 1000, "chunk_delay": 0.5}
    stream, run = await ask(limited_stack, browser, [slow])

    assert run["status"] == "incomplete"
    assert f"{DEADLINE:.0f}" in run["error"]
    assert stream.runs()[-1][-1][2]["answer"].startswith("w w ")


ROUNDS = 4
POOL_SLACK = 3


def resources(stack: Stack) -> dict[str, int]:
    """Open file descriptors and threads of the server and the worker, and the channels
    Redis holds subscriptions for."""
    import redis

    counts = {}
    for process in (stack.daphne, stack.worker):
        assert process is not None
        counts[f"{process.name} fds"] = len(os.listdir(f"/proc/{process.pid}/fd"))
        counts[f"{process.name} threads"] = len(os.listdir(f"/proc/{process.pid}/task"))
    client = redis.Redis.from_url(stack.redis_url)
    counts["redis subscriptions"] = len(client.pubsub_channels())
    client.close()
    return counts


async def test_finished_streams_leave_nothing_behind(limited_stack: Stack, browser) -> None:
    """Streams ended by faults (a cut, a rate limit, server errors) and followed over SSE
    and the websocket: once they end, no descriptor, thread or subscription remains."""
    faults = [
        [{"chunks": ["Cut ", "short ", "here"], "cut_after": 2}],
        [{"status": 429, "headers": {"Retry-After": "1"}}, "Fine."],
        [{"status": 503}] * 8,
    ]

    async def one_round() -> None:
        for responses in faults:
            question = f"LEAK-{secrets.token_hex(4)}"
            limited_stack.script(
                rules=[{"contains": question, "in": "any", "responses": responses}]
            )
            conversation_id = await browser.new_conversation()
            socket = Frames(browser.socket(conversation_id))
            async with EventStream(browser, conversation_id) as stream, socket:
                await browser.send(conversation_id, question)
                await async_wait_for(stream.ended, timeout=30, what="the run's end")

    await one_round()  # pools and caches fill once
    before = await asyncio.to_thread(resources, limited_stack)
    for _ in range(ROUNDS):
        await one_round()
    # A stream's unsubscribe and a socket's close finish just after the client's end:
    # wait (bounded) for the counts to come back, then check them.
    streams = ROUNDS * len(faults)

    def settled(counts: dict[str, int]) -> bool:
        # Pools (database threads and their connections, the Redis pool) grow on demand up
        # to their size and may hold a few more after a busier moment; a leak grows per
        # stream.
        grown = ("daphne fds", "worker fds", "daphne threads", "worker threads")
        return all(counts[n] <= before[n] + POOL_SLACK for n in grown) and (
            counts["redis subscriptions"] <= before["redis subscriptions"]
        )

    async def after_settling() -> dict[str, int] | None:
        counts = await asyncio.to_thread(resources, limited_stack)
        return counts if settled(counts) else None

    try:
        after = await async_wait_for(after_settling, timeout=10, what="resources to settle")
    except TimeoutError:
        after = await asyncio.to_thread(resources, limited_stack)
    assert streams > POOL_SLACK  # the slack could not hide one leak per stream
    assert settled(after), (before, after)
