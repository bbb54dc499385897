"""Plan mode in team mode: a plan run executed by a Celery worker process, streamed as
Server-Sent Events by daphne, stopped from daphne.

An API client (a personal token, no browser session) posts a message with mode "plan" and
follows the conversation's SSE stream on daphne. The planner, the three steps, the
analyzer and the answer writer are all calls from the worker to the scripted LLM server,
told apart by their prompts (as in tests/conversations/api/test_plan_mode.py); the phases
and step progress reach daphne through Redis, and the durable log replays them the same.
Holding a reply at the scripted server (``after_release``) is how the test knows what is
running; nothing waits on a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from engine.plan import prompts
from tests.integration.runs import run_ends, run_row, tag, worker_logged
from tests.integration.stack import USERNAME, Stack, async_wait_for, running_stack, stop_reading

pytestmark = pytest.mark.integration

TERMINAL = ("done", "error")
ANSWER_CHUNKS = ["Tokyo is ", "**warmer** ", "than Paris."]
ANSWER = "".join(ANSWER_CHUNKS)
VERDICT = {"achieved": True, "confidence": 0.9, "final_answer": "", "reasoning": "All there."}
CANCELLED_BY_USER = "Cancelled by the user"  # engine.plan.executor's error for a stopped step
TOKEN_FILE = "api-token"

# Run by the stack's set-up (Django ready, the user created): a personal API token, written
# where the test reads it (the test process has no database of its own).
CREATE_TOKEN = f"""
import os
from pathlib import Path
from django.contrib.auth import get_user_model
from conversations.http.tokens import token_create
_, raw = token_create(user=get_user_model().objects.get(username={USERNAME!r}), name="plan")
var = Path(os.environ["AGENTSITE_VAR_DIR"])
var.mkdir(parents=True, exist_ok=True)
(var / {TOKEN_FILE!r}).write_text(raw)
"""


@pytest.fixture(scope="module")
def plan_stack() -> Iterator[Stack]:
    """Redis, PostgreSQL, the scripted LLM, a Celery worker and daphne, on loopback.

    As in conftest's ``team_stack``, the worker's heartbeat (which would also bring a Stop)
    is far beyond every timeout: Stop must reach the worker through the wake-up.
    """
    no_fallback = {"AGENTSITE_RUN_HEARTBEAT_SECONDS": "600"}
    with running_stack(mode="team", extra_env=no_fallback, setup_extra=CREATE_TOKEN) as stack:
        yield stack


@pytest.fixture
async def api(plan_stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    """An API client of daphne authenticated with the user's bearer token."""
    token = (plan_stack.work / "var" / TOKEN_FILE).read_text().strip()
    async with httpx.AsyncClient(
        base_url=plan_stack.base_url,
        headers={"Authorization": f"Bearer {token}"},
        trust_env=False,
        timeout=30,
    ) as client:
        yield client


# ------------------------------------------------------------------------- the script


def tasks(marker: str) -> dict[str, str]:
    return {
        "tokyo": f"Weather in Tokyo {marker}",
        "paris": f"Weather in Paris {marker}",
        "compare": f"Compare both {marker}",
    }


def plan_rules(
    marker: str, *, held_steps: tuple[str, ...] = (), answer_after: str | None = None
) -> list[dict[str, Any]]:
    """Planner, analyzer and answer writer by their system prompts; each step by its task.

    The steps in ``held_steps`` answer only once ``marker`` is released (never, in these
    tests: they are running until stopped); the answer writer once ``answer_after`` is.
    """
    task = tasks(marker)
    plan = {
        "steps": [
            {"id": "tokyo", "task": task["tokyo"], "dependencies": []},
            {"id": "paris", "task": task["paris"], "dependencies": []},
            {"id": "compare", "task": task["compare"], "dependencies": ["tokyo", "paris"]},
        ]
    }
    results = {
        "tokyo": "Tokyo: 18 °C",
        "paris": "Paris: 9 °C",
        "compare": "Tokyo is 9 degrees warmer.",
    }
    answer: dict[str, Any] = {"content": ANSWER, "chunks": ANSWER_CHUNKS}
    if answer_after is not None:
        answer["after_release"] = answer_after

    def system(prompt: str, response: dict[str, Any]) -> dict[str, Any]:
        return {"contains": prompt[:60], "in": "any", "response": response}

    def step(step_id: str) -> dict[str, Any]:
        response: dict[str, Any] = {"content": results[step_id]}
        if step_id in held_steps:
            response["after_release"] = marker
        return {"contains": f"## Your step\n{task[step_id]}", "response": response}

    return [
        system(
            prompts.planner_system_prompt(10),
            {"tool_calls": [{"name": "submit_plan", "arguments": plan}]},
        ),
        system(
            prompts.ANALYZER_SYSTEM_PROMPT,
            {"tool_calls": [{"name": "submit_analysis", "arguments": VERDICT}]},
        ),
        system(prompts.ANSWER_SYSTEM_PROMPT, answer),
        step("tokyo"),
        step("paris"),
        step("compare"),
    ]


def release(stack: Stack, name: str) -> None:
    response = httpx.post(
        f"{stack.llm_base}/_release", json={"name": name}, timeout=5, trust_env=False
    )
    response.raise_for_status()


def sent_text(request: dict[str, Any]) -> str:
    """What the model was sent: its messages' text."""
    return "\n".join(str(m.get("content") or "") for m in request["body"]["messages"])


async def llm_requests_with(stack: Stack, *texts: str) -> list[dict[str, Any]]:
    """The scripted server's recorded requests whose messages contain all of ``texts``."""
    recorded = await asyncio.to_thread(stack.llm_requests)
    return [r for r in recorded if all(text in sent_text(r) for text in texts)]


# ------------------------------------------------------------------------ the stream


@dataclass(frozen=True)
class Event:
    id: int
    event: str
    data: dict[str, Any]

    def key(self) -> tuple[int, str, str]:
        return self.id, self.event, json.dumps(self.data, sort_keys=True)


def parse_sse(lines: list[str]) -> Iterator[Event]:
    """Events of an SSE body's lines (comments such as heartbeats skipped)."""
    fields: dict[str, str] = {}
    for line in lines:
        if not line:
            if "id" in fields:
                yield Event(int(fields["id"]), fields["event"], json.loads(fields["data"]))
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


class LiveEvents:
    """The conversation's SSE stream on daphne (``follow=1`` from event 0), read in the
    background from before the message is posted: everything in it arrived live."""

    def __init__(
        self, http: httpx.AsyncClient, conversation_id: int, *, describe: Callable[[], str]
    ) -> None:
        self.http = http
        self.path = f"/api/conversations/{conversation_id}/events"
        self.describe = describe
        self.events: list[Event] = []
        self.opened = asyncio.Event()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LiveEvents:
        self._task = asyncio.ensure_future(self._read())
        # The response starts once daphne joined the conversation's group on Redis.
        opened = asyncio.ensure_future(self.opened.wait())
        await asyncio.wait({opened, self._task}, timeout=20, return_when="FIRST_COMPLETED")
        opened.cancel()
        if not self.opened.is_set():
            if self._task.done():
                self._task.result()  # its exception, if it failed
            raise AssertionError(f"the event stream did not open\n{self.describe()}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await stop_reading(self._task)

    async def _read(self) -> None:
        params = {"after": "0", "follow": "1"}
        async with self.http.stream("GET", self.path, params=params, timeout=None) as response:
            assert response.status_code == 200, response.status_code
            assert response.headers["content-type"].startswith("text/event-stream")
            self.opened.set()
            lines: list[str] = []
            async for line in response.aiter_lines():
                lines.append(line)
                if not line:
                    self.events.extend(parse_sse(lines))
                    lines = []
                    self._changed.set()

    async def wait(self, predicate: Callable[[Event], bool], *, timeout: float, what: str) -> Event:
        """The first event (received or coming) matching ``predicate``."""
        deadline = time.monotonic() + timeout
        while True:
            found = next((e for e in self.events if predicate(e)), None)
            if found is not None:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (self._task is not None and self._task.done()):
                raise AssertionError(
                    f"no event {what} within {timeout:.0f}s; {len(self.events)} events:\n"
                    + "\n".join(f"{e.id} {e.event} {json.dumps(e.data)[:200]}" for e in self.events)
                    + "\n"
                    + self.describe()
                )
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.5))


async def replay(http: httpx.AsyncClient, conversation_id: int) -> list[Event]:
    """The conversation's durable log from the start (the stream ends after the run's end)."""
    response = await http.get(f"/api/conversations/{conversation_id}/events?after=0")
    assert response.status_code == 200, response.text[:300]
    return list(parse_sse(response.text.split("\n")))


def is_phase(name: str) -> Callable[[Event], bool]:
    return lambda e: e.event == "phase" and e.data["phase"] == name


def is_step(step_id: str, event: str) -> Callable[[Event], bool]:
    return lambda e: (
        e.event == "step_progress" and e.data["step_id"] == step_id and e.data["event"] == event
    )


def position(events: list[Event], predicate: Callable[[Event], bool]) -> int:
    return next(i for i, e in enumerate(events) if predicate(e))


def progress_by_step(events: list[Event]) -> dict[str, list[str]]:
    steps: dict[str, list[str]] = {}
    for e in events:
        if e.event == "step_progress":
            steps.setdefault(e.data["step_id"], []).append(e.data["event"])
    return steps


# ------------------------------------------------------------------------ the run


async def new_conversation(api: httpx.AsyncClient) -> int:
    created = await api.post("/api/conversations", json={"title": "plan in team mode"})
    assert created.status_code == 201, created.text[:300]
    assert created.json()["mode"] == "react"  # plan mode is chosen with the message
    return int(created.json()["id"])


async def post_plan(api: httpx.AsyncClient, conversation_id: int, content: str) -> int:
    posted = await api.post(
        f"/api/conversations/{conversation_id}/messages", json={"content": content, "mode": "plan"}
    )
    assert posted.status_code == 202, posted.text[:300]
    assert posted.json()["injected"] is False
    return int(posted.json()["run_id"])


async def assert_ran_in_the_worker(stack: Stack, run_id: int, status: str) -> None:
    """The worker claimed the run (its Celery task id) and finished it; daphne did neither:
    in team mode the web server only queues runs."""
    row = await run_ends(stack, run_id)
    assert row["status"] == status and row["mode"] == "plan", row
    assert row["task_id"], "the worker records its Celery task id when it claims the run"
    await worker_logged(stack, f"run {run_id} finished: {status}")
    finished = next(
        line for line in stack.worker.text().splitlines() if f"run {run_id} finished" in line
    )
    assert f"Celery task {row['task_id']}" in finished, finished
    daphne = stack.daphne.text()
    assert f"run {run_id} " not in daphne and "plan round" not in daphne
    assert "runs execute on" not in daphne  # no run loop in the web server at all


# ------------------------------------------------------------------------ the tests


async def test_a_plan_run_executes_in_the_worker_and_streams_live_through_daphne(
    plan_stack: Stack, api: httpx.AsyncClient
) -> None:
    stack, marker = plan_stack, tag("PLAN")
    answer_gate = f"answer-{marker}"
    stack.script(rules=plan_rules(marker, answer_after=answer_gate))
    goal = f"Compare the weather in Tokyo and Paris ({marker})"
    conversation_id = await new_conversation(api)

    async with LiveEvents(api, conversation_id, describe=stack.logs) as live:
        run_id = await post_plan(api, conversation_id, goal)
        await live.wait(is_phase("analyzed"), timeout=30, what="the analyzer's verdict")
        # The answer writer's reply is held: the run is still going, so every event so far
        # (the plan and its three steps) came over the live stream, not from a replay.
        await async_wait_for(
            lambda: llm_requests_with(stack, prompts.ANSWER_SYSTEM_PROMPT[:60], marker),
            timeout=20,
            what="the answer writer's request",
            detail=stack.logs,
        )
        assert not [e for e in live.events if e.event in ("answer", *TERMINAL)]
        assert (await run_row(stack, run_id))["status"] == "running"
        await asyncio.to_thread(release, stack, answer_gate)
        end = await live.wait(lambda e: e.event in TERMINAL, timeout=20, what="the run's end")
    events = live.events

    assert end.event == "done" and end is events[-1], end
    assert [e.id for e in events] == sorted({e.id for e in events})  # increasing, no repeats
    assert {e.data["branch"]["run_id"] for e in events} == {run_id}
    # Phases, in order: one round, achieved.
    phases = [e.data for e in events if e.event == "phase"]
    assert [p["phase"] for p in phases] == ["planning", "executing", "analyzing", "analyzed"]
    assert all(p["round"] == 1 for p in phases[:3])
    assert [s["id"] for s in phases[1]["plan"]["steps"]] == ["tokyo", "paris", "compare"]
    assert phases[3]["achieved"] is True and phases[3]["confidence"] == 0.9
    # The steps: each started and completed, between "executing" and "analyzing".
    executing = position(events, is_phase("executing"))
    analyzing = position(events, is_phase("analyzing"))
    progress = [i for i, e in enumerate(events) if e.event == "step_progress"]
    assert progress and executing < min(progress) and max(progress) < analyzing
    steps = progress_by_step(events)
    assert sorted(steps) == ["compare", "paris", "tokyo"]
    for step_id, kinds in steps.items():
        assert kinds[0] == "started" and kinds[-1] == "completed", (step_id, kinds)
        assert not {"failed", "skipped"} & set(kinds), (step_id, kinds)
    completed = {
        e.data["step_id"]: e.data
        for e in events
        if e.event == "step_progress" and e.data["event"] == "completed"
    }
    assert completed["tokyo"]["result"] == "Tokyo: 18 °C"
    assert completed["paris"]["result"] == "Paris: 9 °C"
    assert completed["compare"]["result"] == "Tokyo is 9 degrees warmer."
    assert all(p["round"] == 1 and p["model"] for p in completed.values())
    # "compare" waited for both steps it depends on.
    compare_started = position(events, is_step("compare", "started"))
    assert compare_started > position(events, is_step("tokyo", "completed"))
    assert compare_started > position(events, is_step("paris", "completed"))
    # The answer streamed after the verdict, and the deltas add up to the done answer.
    answers = [i for i, e in enumerate(events) if e.event == "answer"]
    assert answers and min(answers) > position(events, is_phase("analyzed"))
    deltas = [events[i].data for i in answers if events[i].data.get("status") == "delta"]
    streamed = "".join(d.get("content", "") for d in deltas)
    assert streamed == ANSWER == end.data["answer"]
    assert end.data.get("status", "succeeded") == "succeeded"

    # The durable log replays exactly what arrived live.
    logged = await replay(api, conversation_id)
    assert [e.key() for e in logged] == [e.key() for e in events]
    # Saved: the run (plan mode), the answer; the writer saw every step's result.
    detail = (await api.get(f"/api/conversations/{conversation_id}")).json()
    assert [(r["id"], r["status"], r["mode"]) for r in detail["runs"]] == [
        (run_id, "succeeded", "plan")
    ]
    assert detail["messages"][-1]["role"] == "assistant"
    assert detail["messages"][-1]["content"] == ANSWER
    writer = await llm_requests_with(stack, prompts.ANSWER_SYSTEM_PROMPT[:60], marker)
    assert len(writer) == 1
    assert "Tokyo: 18 °C" in sent_text(writer[0]) and "Paris: 9 °C" in sent_text(writer[0])
    await assert_ran_in_the_worker(stack, run_id, "succeeded")
    await worker_logged(stack, "plan round 1: tokyo=completed, paris=completed, compare=completed")


@dataclass
class Stopped:
    """A plan run stopped while two of its steps were running (their LLM calls held)."""

    marker: str
    run_id: int
    conversation_id: int
    events: list[Event]
    tasks: dict[str, str]
    disconnects: int  # the scripted server's count just before Stop


async def stop_mid_plan(stack: Stack, api: httpx.AsyncClient, marker: str) -> Stopped:
    """Post a plan whose Tokyo and Paris steps answer only when released (never), wait until
    both steps' calls are at the scripted server, press Stop, read the stream to its end.
    "compare" waits for both and never starts."""
    stack.script(rules=plan_rules(marker, held_steps=("tokyo", "paris")))
    task = tasks(marker)
    goal = f"Compare the weather in Tokyo and Paris ({marker})"
    conversation_id = await new_conversation(api)

    async with LiveEvents(api, conversation_id, describe=stack.logs) as live:
        run_id = await post_plan(api, conversation_id, goal)
        for step_id in ("tokyo", "paris"):
            await live.wait(is_step(step_id, "started"), timeout=30, what=f"{step_id} starting")

        # Both steps' LLM calls are in flight at the scripted server (held, unanswered).
        async def both_held() -> bool:
            held = [
                await llm_requests_with(stack, f"## Your step\n{task[step_id]}")
                for step_id in ("tokyo", "paris")
            ]
            return all(held)

        await async_wait_for(
            both_held, timeout=20, what="both steps' LLM calls held", detail=stack.logs
        )
        disconnects = (await asyncio.to_thread(stack.llm_state))["disconnects"]
        assert not [e for e in live.events if e.event in TERMINAL]

        cancel = await api.post(f"/api/runs/{run_id}/cancel")
        assert cancel.status_code == 202, cancel.text[:300]
        assert cancel.json()["cancel_requested"] is True
        await live.wait(lambda e: e.event in TERMINAL, timeout=20, what="the run's end")
    return Stopped(marker, run_id, conversation_id, live.events, task, disconnects)


async def test_stop_while_plan_steps_run_in_the_worker_cancels_every_running_step(
    plan_stack: Stack, api: httpx.AsyncClient
) -> None:
    stack = plan_stack
    stopped = await stop_mid_plan(stack, api, tag("STOP"))
    events, end = stopped.events, stopped.events[-1]

    assert end.event == "error" and end.data["status"] == "cancelled", end
    assert [e.id for e in events] == sorted({e.id for e in events})
    assert [e.data["phase"] for e in events if e.event == "phase"] == ["planning", "executing"]
    assert not [e for e in events if e.event in ("answer", "done")]
    # Every step that was running was stopped; the one waiting for them never started.
    steps = progress_by_step(events)
    assert sorted(steps) == ["paris", "tokyo"], steps
    for step_id in ("tokyo", "paris"):
        kinds = steps[step_id]
        assert kinds[0] == "started" and kinds[-1] == "failed", (step_id, kinds)
        assert "completed" not in kinds, (step_id, kinds)
        failed = [e.data for e in events if is_step(step_id, "failed")(e)]
        assert [f["error"] for f in failed] == [CANCELLED_BY_USER], failed
    for step_id in ("tokyo", "paris"):
        asked = await llm_requests_with(stack, f"## Your step\n{stopped.tasks[step_id]}")
        assert len(asked) == 1  # not retried after Stop
    assert not await llm_requests_with(stack, f"## Your step\n{stopped.tasks['compare']}")
    assert not await llm_requests_with(stack, prompts.ANALYZER_SYSTEM_PROMPT[:60], stopped.marker)
    # The durable log replays exactly what arrived live; the worker ran and ended the run.
    logged = await replay(api, stopped.conversation_id)
    assert [e.key() for e in logged] == [e.key() for e in events]
    await assert_ran_in_the_worker(stack, stopped.run_id, "cancelled")


async def test_stop_mid_plan_closes_the_held_step_requests_upstream(
    plan_stack: Stack, api: httpx.AsyncClient
) -> None:
    """What a provider sees of Stop: the steps' requests closed, not left generating."""
    stack = plan_stack
    stopped = await stop_mid_plan(stack, api, tag("UPSTREAM"))
    assert stopped.events[-1].data.get("status") == "cancelled"

    await async_wait_for(
        lambda: asyncio.to_thread(
            lambda: stack.llm_state()["disconnects"] >= stopped.disconnects + 2
        ),
        timeout=5,
        what="the scripted server to see both held step calls closed",
        detail=lambda: f"{stack.llm_state()}\n{stack.logs()}",
    )
