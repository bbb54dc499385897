"""Team mode for real: Redis, PostgreSQL, a Celery worker process and daphne on loopback.

A browser-like client logs in over HTTP, posts messages and listens on the conversation
websocket. The run executes in the worker process; its frames reach daphne through Redis;
a follow-up and a Stop posted to daphne reach the running worker through the database.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import pytest
import redis

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

SLOW_LLM_SECONDS = 3.0  # the first reply while a follow-up is posted
HANGING_LLM_SECONDS = 30.0  # a reply Stop must cut short
DELTA = re.compile(r'<span hx-swap-oob="beforeend:#answer-src-(\d+)">(.*?)</span>', re.S)


def assert_streamed(frames: list[str], run_id: int, answer: str) -> None:
    """Answer deltas arrived live, before the finish frame, and add up to the answer (from
    the last reset: text taken back because it was a step's thought)."""
    finish = next(i for i, f in enumerate(frames) if finished_frame(run_id)(f))
    deltas: list[str] = []
    for f in frames[:finish]:
        if f'id="answer-{run_id}"' in f:  # the answer element replaced: emptied
            deltas = []
        deltas += [text for rid, text in DELTA.findall(f) if int(rid) == run_id]
    assert deltas, f"no answer delta before the finish frame: {frames}"
    assert "".join(deltas) == answer, deltas
    assert f"<p>{answer}</p>" in frames[finish]


def finished_frame(run_id: int) -> Any:
    """The run-finish frame: footer or error status, sent once the run is over."""
    return lambda f: f'id="footer-{run_id}"' in f and f'id="status-{run_id}"' in f


async def llm_requests_with(stack: Stack, marker: str) -> list[dict[str, Any]]:
    recorded = await asyncio.to_thread(stack.llm_requests)
    return [r for r in recorded if marker in json.dumps(r["body"])]


async def first_llm_request(stack: Stack, marker: str) -> dict[str, Any]:
    """Wait until the scripted server received the run's first request; return it."""
    requests = await async_wait_for(
        lambda: llm_requests_with(stack, marker),
        timeout=20,
        what="the worker's first LLM request",
        detail=stack.logs,
    )
    return requests[0]


async def test_a_run_executes_in_the_worker_and_streams_through_redis(
    team_stack: Stack, browser: Browser
) -> None:
    stack, marker = team_stack, tag("ALPHA")
    stack.script(
        rules=[
            {
                "contains": marker,
                "in": "any",
                "responses": [
                    {"chunks": ["Hello ", "from ", "the ", "worker."], "chunk_delay": 0.05},
                ],
            }
        ]
    )
    conversation_id = await browser.new_conversation()
    broker = redis.Redis.from_url(stack.redis_url)
    sorted_set_writes = zadd_calls(broker)
    async with Frames(browser.socket(conversation_id), describe=stack.logs) as frames:
        # daphne subscribed this conversation's group on Redis: the only way in for frames.
        group = f"asgi__group__conversation.{conversation_id}"
        # (Subscribing only sends the command: Redis may answer this query first.)
        subscribers = await async_wait_for(
            lambda: broker.pubsub_numsub(group)[0][1], timeout=5, what="daphne's subscription"
        )
        assert subscribers == 1

        response = await browser.send(conversation_id, f"{marker}: say hello")
        run_id = run_id_of(response)
        await frames.wait(finished_frame(run_id), timeout=20, what="ending the run")

    assert_streamed(frames.frames, run_id, "Hello from the worker.")
    row = await run_ends(stack, run_id)
    assert row["status"] == "succeeded", row
    assert row["task_id"], "the worker records its Celery task id"
    await worker_logged(stack, f"run {run_id} finished: succeeded")
    await worker_logged(stack, f"Celery task {row['task_id']}")
    # Celery's own line per task is off: the runner's line above replaces it.
    assert f"run_agent[{row['task_id']}] received" not in stack.worker.text()
    assert f"run {run_id} finished" not in stack.daphne.text()  # not executed in daphne
    assert len(await llm_requests_with(stack, marker)) == 1  # the answer is the loop's call
    # The worker's runs on uvloop, the server on asyncio's loop (core.eventloop's
    # defaults: twisted on uvloop misses clients that reset their connection).
    await worker_logged(stack, "runs execute on uvloop.Loop")
    assert "serving on asyncio.unix_events._UnixSelectorEventLoop" in stack.daphne.text()
    # Kombu's acknowledgement emulation (an "unacked" index updated with ZADD for every
    # delivered task) is off: it cost two round trips per run and never helped.
    assert zadd_calls(broker) == sorted_set_writes


def zadd_calls(client: redis.Redis) -> int:
    """How many ZADD commands the Redis server executed so far."""
    return int(client.info("commandstats").get("cmdstat_zadd", {}).get("calls", 0))


async def test_a_follow_up_reaches_the_running_worker(team_stack: Stack, browser: Browser) -> None:
    stack, marker = team_stack, tag("BRAVO")
    stack.script(
        rules=[
            {
                "contains": marker,
                "in": "any",
                "responses": [
                    {"content": "First thoughts.", "delay": SLOW_LLM_SECONDS},
                    {"chunks": ["Penguins ", "included."]},
                ],
            }
        ]
    )
    conversation_id = await browser.new_conversation()
    async with Frames(browser.socket(conversation_id), describe=stack.logs) as frames:
        response = await browser.send(conversation_id, f"{marker}: tell me about birds")
        run_id = run_id_of(response)
        # The worker is inside the slow LLM call once the scripted server has the request.
        first = await first_llm_request(stack, marker)
        follow_up = await browser.send(conversation_id, f"{marker} also mention penguins")
        posted_at = time.monotonic()
        assert 'class="msg user inject"' in follow_up.text  # shown at once, as an inject

        await frames.wait(
            lambda f: "also mention penguins" in f and "delivered to the agent" in f,
            timeout=15,
            what="marking the follow-up delivered",
        )
        await frames.wait(finished_frame(run_id), timeout=20, what="ending the run")

    # Posted while the slow reply was still in flight (same monotonic clock on one host).
    assert posted_at < first["time"] + SLOW_LLM_SECONDS
    requests = await llm_requests_with(stack, marker)
    assert len(requests) == 2, [r["body"]["messages"][-1] for r in requests]
    second = requests[1]["body"]["messages"]
    interrupts = [
        m["content"]
        for m in second
        if m["role"] == "user" and str(m.get("content")).startswith("[USER INTERRUPT]")
    ]
    assert len(interrupts) == 1 and "also mention penguins" in interrupts[0], second
    first_messages = requests[0]["body"]["messages"]
    assert not any(str(m.get("content")).startswith("[USER INTERRUPT]") for m in first_messages)
    row = await run_ends(stack, run_id)
    assert row["status"] == "succeeded", row
    delivered = await asyncio.to_thread(
        stack.query,
        "SELECT delivered_at IS NOT NULL FROM conversations_message "
        "WHERE run_id = %s AND kind = 'inject'",
        run_id,
    )
    assert delivered == [(True,)]
    assert_streamed(frames.frames, run_id, "Penguins included.")


async def test_a_follow_up_sent_while_the_answer_streams_is_answered_by_a_new_worker_run(
    team_stack: Stack, browser: Browser
) -> None:
    """Too late for the agent: the worker closes the run, announces the run answering the
    follow-up (its block reaches the page first) and enqueues it; a worker executes it."""
    stack, marker = team_stack, tag("DELTA")
    stack.script(
        rules=[
            {
                "contains": marker,
                "in": "any",
                "responses": [
                    {"chunks": ["Birds ", "fly ", "high."], "chunk_delay": 0.5},
                    {"chunks": ["Penguins ", "swim."]},
                ],
            }
        ]
    )
    conversation_id = await browser.new_conversation()
    async with Frames(browser.socket(conversation_id), describe=stack.logs) as frames:
        run_id = run_id_of(await browser.send(conversation_id, f"{marker}: do birds fly?"))
        await frames.wait(
            lambda f: f"beforeend:#answer-src-{run_id}" in f and "Birds" in f,
            timeout=15,
            what="the answer streaming",
        )
        follow_up = await browser.send(conversation_id, f"{marker} and penguins?")
        assert 'class="msg user inject"' in follow_up.text

        announced = await frames.wait(
            lambda f: f'id="next-{run_id}"' in f and "and penguins?" in f,
            timeout=20,
            what="the follow-up run's announcement",
        )
        match = re.search(r'<section id="run-(\d+)"', announced)
        assert match is not None, announced
        second = int(match.group(1))
        await frames.wait(
            lambda f: f'id="footer-{second}" class="run-footer" hx-swap-oob="true"' in f,
            timeout=20,
            what="the follow-up run's end",
        )
        after = frames.frames[frames.frames.index(announced) + 1 :]
        assert_streamed(after, second, "Penguins swim.")  # into the block announced first

    assert second != run_id
    assert (await run_ends(stack, run_id))["status"] == "succeeded"
    assert (await run_ends(stack, second))["status"] == "succeeded"
    await worker_logged(stack, f"run {second} finished: succeeded")
    requests = await llm_requests_with(stack, marker)
    assert len(requests) == 2, [r["body"]["messages"][-1] for r in requests]
    assert "and penguins?" in str(requests[1]["body"]["messages"][-1]["content"])


async def test_stop_reaches_the_worker_and_closes_the_llm_request(
    team_stack: Stack, browser: Browser
) -> None:
    stack, marker = team_stack, tag("CHARLIE")
    stack.script(
        rules=[
            {
                "contains": marker,
                "in": "any",
                "responses": [{"content": "Too late.", "delay": HANGING_LLM_SECONDS}],
            }
        ]
    )
    conversation_id = await browser.new_conversation()
    async with Frames(browser.socket(conversation_id), describe=stack.logs) as frames:
        response = await browser.send(conversation_id, f"{marker}: think for a long time")
        run_id = run_id_of(response)
        await first_llm_request(stack, marker)
        disconnects = (await asyncio.to_thread(stack.llm_state))["disconnects"]

        stop = await browser.cancel(run_id)
        stopped_at = time.monotonic()
        assert stop.status_code == 204
        await frames.wait(
            lambda f: f'id="status-{run_id}" class="run-status cancelled"' in f,
            timeout=15,
            what="showing the run cancelled",
        )
        shown_after = time.monotonic() - stopped_at

    row = await run_ends(stack, run_id)
    assert row["status"] == "cancelled", row

    # The upstream request was closed by the worker, not answered after the scripted delay.
    def closed() -> bool:
        return stack.llm_state()["disconnects"] > disconnects

    await async_wait_for(
        lambda: asyncio.to_thread(closed),
        timeout=10,
        what="the scripted server to see the connection closed",
    )
    assert shown_after < HANGING_LLM_SECONDS / 3, shown_after
    await worker_logged(stack, f"run {run_id} finished: cancelled")
    assert len(await llm_requests_with(stack, marker)) == 1
    assert not any("Too late." in f for f in frames.frames)


async def test_page_loads_reuse_the_servers_redis_connections(
    team_stack: Stack, browser: Browser
) -> None:
    """Under ASGI every request runs in a thread of its own: per-thread cache objects
    meant a new Redis connection per page (its session lookup)."""
    conversation_id = await browser.new_conversation()
    await browser.http.get(f"/c/{conversation_id}/")  # warm: the pool holds a connection
    server = redis.Redis.from_url(team_stack.redis_url)
    before = server.info("stats")["total_connections_received"]

    for _ in range(20):
        page = await browser.http.get(f"/c/{conversation_id}/")
        assert page.status_code == 200

    assert server.info("stats")["total_connections_received"] - before < 5


async def test_finished_event_streams_leave_no_subscription_behind(
    team_stack: Stack, browser: Browser
) -> None:
    """An SSE stream's channel is subscribed on Redis for the stream's life only: a server
    that served 300 streams must not hold 300 subscriptions (re-subscribed on every Redis
    reconnect)."""
    stack, marker = team_stack, tag("STREAMS")
    stack.script(
        rules=[
            {
                "contains": marker,
                "in": "any",
                "responses": [{"chunks": ["All ", "done."]}],
            }
        ]
    )
    conversation_id = await browser.new_conversation()
    run_id = run_id_of(await browser.send(conversation_id, f"{marker}: hello"))
    await run_ends(stack, run_id)
    broker = redis.Redis.from_url(stack.redis_url)
    before = set(broker.pubsub_channels())

    def added() -> set[bytes]:
        # Less the one channel a server holds for its life (the next test).
        now = set(broker.pubsub_channels())
        return {name for name in now - before if b"agentsite.listening." not in name}

    for _ in range(5):
        replay = await browser.http.get(f"/api/conversations/{conversation_id}/events?after=0")
        assert replay.status_code == 200 and "event: done" in replay.text

    await async_wait_for(
        lambda: not added(),
        timeout=5,
        what="the finished streams' subscriptions to go",
        detail=lambda: str(added()),
    )
    assert len(broker.pubsub_channels("*agentsite.listening.*")) == 1


async def test_a_server_keeps_listening_after_its_last_socket_closed(
    team_stack: Stack, browser: Browser
) -> None:
    """channels_redis's receiver sleeps 100 ms at a time while its process subscribes to
    nothing, so a chat opened after every other had closed got its first frames late: the
    server holds one channel for its life, and sockets coming and going leave it."""
    broker = redis.Redis.from_url(team_stack.redis_url)
    conversation_id = await browser.new_conversation()

    async with browser.socket(conversation_id):
        pass
    async with browser.socket(conversation_id):
        pass

    await async_wait_for(
        lambda: not broker.pubsub_channels(f"*__group__conversation.{conversation_id}"),
        timeout=5,
        what="the closed sockets' subscriptions to go",
    )
    assert len(broker.pubsub_channels("*agentsite.listening.*")) == 1


async def test_a_prefork_worker_runs_each_childs_runs_on_its_own_runtime() -> None:
    """Celery's default pool forks children after the worker started: each child builds
    the runtime it executes runs on (worker_process_init), none inherits a dead loop."""
    with running_stack(mode="team", pool="prefork", concurrency=2) as stack:
        marker = tag("PREFORK")
        stack.script(
            rules=[
                {
                    "contains": marker,
                    "in": "any",
                    "responses": [{"chunks": ["Forked ", "and ", "fine."], "chunk_delay": 0.05}],
                }
            ]
        )
        async with Browser(stack.base_url) as browser:
            await browser.login()
            conversation_id = await browser.new_conversation()
            async with Frames(browser.socket(conversation_id), describe=stack.logs) as frames:
                run_id = run_id_of(await browser.send(conversation_id, f"{marker}: go"))
                await frames.wait(finished_frame(run_id), timeout=30, what="ending the run")
        assert_streamed(frames.frames, run_id, "Forked and fine.")
        assert (await run_ends(stack, run_id))["status"] == "succeeded"
        # One runtime per child, none in the parent (which only hands tasks out).
        await async_wait_for(
            lambda: stack.worker.text().count("runs execute on") == 2,
            timeout=10,
            what="both children's runtimes",
        )
