"""Tools that need the user's approval: the loop pauses at the call, asks, and goes on
with the tool's result (approved) or with the refusal as the observation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.agent import ReActAgent
from engine.answer import CANCELLED
from engine.approval import APPROVED, DENIED, EXPIRED, ApprovalRequest, call_binding
from engine.cancel import CancelToken
from engine.events import AgentEvent, Approval, IterationDone
from engine.tools import Tool, ToolRegistry
from testing.scripted_llm import ScriptedLLM

OBJECT = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
ran: list[dict[str, Any]] = []


async def delete(path: str) -> str:
    ran.append({"path": path})
    return f"deleted {path}"


def deleting_tool(**options: Any) -> Tool:
    return Tool("delete", "Delete a file.", OBJECT, delete, **options)


def agent(tool: Tool, approver: Any, events: list[AgentEvent], **kwargs: Any) -> ReActAgent:
    llm = ScriptedLLM(
        [{"tool_calls": [{"id": "c1", "name": "delete", "arguments": {"path": "/a"}}]}, "Done."],
        abilities={"tool_call": True},
    )

    async def on_event(event: AgentEvent) -> None:
        events.append(event)

    return ReActAgent(llm, ToolRegistry([tool]), approver=approver, on_event=on_event, **kwargs)


@pytest.fixture(autouse=True)
def nothing_ran() -> None:
    ran.clear()


async def test_an_approved_call_runs_after_the_user_said_yes() -> None:
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> str:
        asked.append(request)
        assert not ran  # paused before the tool
        return APPROVED

    events: list[AgentEvent] = []
    result = await agent(deleting_tool(requires_confirmation=True), approve, events).run("go")

    assert ran == [{"path": "/a"}]
    [request] = asked
    assert (request.tool_name, request.tool_args) == ("delete", {"path": "/a"})
    assert request.reason  # says why it asks
    assert request.call_id.startswith("approval-")  # the loop's id, not the model's "c1"
    approvals = [e.to_dict() for e in events if isinstance(e, Approval)]
    assert [a["status"] for a in approvals] == ["requested", "approved"]
    assert approvals[0]["tool_args"] == {"path": "/a"}
    assert approvals[0]["call_id"] == approvals[1]["call_id"] == request.call_id
    assert result.steps[0].observation == "deleted /a"


@pytest.mark.parametrize(("decision", "said"), [(DENIED, "denied"), (EXPIRED, "did not answer")])
async def test_a_refused_call_is_not_run_and_the_agent_is_told(decision: str, said: str) -> None:
    async def refuse(request: ApprovalRequest) -> str:
        return decision

    events: list[AgentEvent] = []
    result = await agent(deleting_tool(requires_confirmation=True), refuse, events).run("go")

    assert ran == []
    assert said in result.steps[0].observation and result.steps[0].error
    done = [e for e in events if isinstance(e, IterationDone)]
    assert said in done[0].observation
    assert [e.to_dict()["status"] for e in events if isinstance(e, Approval)][-1] == decision


async def test_only_the_calls_the_tool_says_need_it_are_asked() -> None:
    """A per-call rule (e.g. an endpoint's non-GET methods): a safe call runs at once."""
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> str:
        asked.append(request)
        return APPROVED

    def risky(arguments: dict[str, Any]) -> str | None:
        return "It deletes outside /tmp." if not arguments["path"].startswith("/tmp") else None

    events: list[AgentEvent] = []
    await agent(deleting_tool(confirm_if=risky), approve, events).run("go")

    assert [r.reason for r in asked] == ["It deletes outside /tmp."]


async def test_without_an_approver_the_call_is_refused_in_plain_words() -> None:
    events: list[AgentEvent] = []
    result = await agent(deleting_tool(requires_confirmation=True), None, events).run("go")

    assert ran == [] and "approval" in result.steps[0].observation


async def test_stop_while_waiting_for_approval_ends_the_run() -> None:
    cancel = CancelToken()
    waiting = asyncio.Event()

    async def never(request: ApprovalRequest) -> str:
        waiting.set()
        await asyncio.Event().wait()
        return APPROVED

    events: list[AgentEvent] = []
    running = asyncio.ensure_future(
        agent(deleting_tool(requires_confirmation=True), never, events, cancel=cancel).run("go")
    )
    await asyncio.wait_for(waiting.wait(), 5)
    cancel.cancel()

    result = await asyncio.wait_for(running, 5)

    assert result.status == CANCELLED and ran == []


async def test_the_wait_does_not_count_against_the_tool_timeout() -> None:
    async def slow_yes(request: ApprovalRequest) -> str:
        await asyncio.sleep(0.3)
        return APPROVED

    events: list[AgentEvent] = []
    tool = deleting_tool(requires_confirmation=True, timeout=0.2)
    result = await agent(tool, slow_yes, events, tool_timeout=0.2).run("go")

    assert ran == [{"path": "/a"}] and result.steps[0].error is None


async def test_a_call_reusing_an_approved_call_id_waits_for_its_own_decision() -> None:
    """The model chooses call ids: a later call with the id of an approved one (another
    path, or the same) must be asked about again, never run on the old decision."""
    reused = [
        {"tool_calls": [{"id": "c1", "name": "delete", "arguments": {"path": "/a"}}]},
        {"tool_calls": [{"id": "c1", "name": "delete", "arguments": {"path": "/etc"}}]},
        {"tool_calls": [{"id": "c1", "name": "delete", "arguments": {"path": "/a"}}]},
        "Done.",
    ]
    llm = ScriptedLLM(reused, abilities={"tool_call": True})
    asked: list[ApprovalRequest] = []

    async def approve_the_first_only(request: ApprovalRequest) -> str:
        asked.append(request)
        return APPROVED if len(asked) == 1 else DENIED

    tools = ToolRegistry([deleting_tool(requires_confirmation=True)])
    result = await ReActAgent(llm, tools, approver=approve_the_first_only).run("go")

    assert ran == [{"path": "/a"}]  # only the call the user approved
    assert [r.tool_args["path"] for r in asked] == ["/a", "/etc", "/a"]  # each one asked
    assert len({r.call_id for r in asked}) == 3
    assert result.steps[1].error and result.steps[2].error
    # Each request is bound to its call: the same call binds alike, another differs.
    assert [r.binding for r in asked] == [
        call_binding("delete", {"path": path}) for path in ("/a", "/etc", "/a")
    ]
    assert asked[0].binding != asked[1].binding


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("delete", {"path": "/a", "force": True}), ("delete", {"force": True, "path": "/a"})),
        (("delete", {"n": 1}), ("delete", {"n": 1.0})),
        # PostgreSQL's jsonb gives these back so: the binding must not change.
        (("delete", {"n": 1e16}), ("delete", {"n": 10**16})),
        (("delete", {"n": 1e-7}), ("delete", {"n": 0.0000001})),
        (
            ("delete", {"n": 0.5, "l": [1, {"b": None}]}),
            ("delete", {"l": [1.0, {"b": None}], "n": 0.50}),
        ),
    ],
)
def test_the_same_call_binds_alike_however_it_is_written(first, second) -> None:
    assert call_binding(*first) == call_binding(*second)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("delete", {"path": "/a"}), ("erase", {"path": "/a"})),
        (("delete", {"path": "/a"}), ("delete", {"path": "/a "})),
        (("delete", {"path": "/a"}), ("delete", {"path": "/a", "force": True})),
        (("delete", {"n": 1}), ("delete", {"n": "1"})),
        (("delete", {"n": 1}), ("delete", {"n": True})),
        (("delete", {"n": 10**40}), ("delete", {"n": 10**40 + 1})),  # no rounding
        (("delete", {"n": [1]}), ("delete", {"n": [[1]]})),
        (("delete", {"n": {"a": 1}}), ("delete", {"n": ["o", [["a", ["n", "1e0"]]]]})),
    ],
)
def test_another_tool_or_other_arguments_bind_otherwise(first, second) -> None:
    assert call_binding(*first) != call_binding(*second)


async def test_two_agents_never_share_an_approval_id() -> None:
    """The steps of a plan are agents of their own, and JSON mode numbers calls per
    agent (call_1, call_2...): their approval requests must not meet."""
    first, second = (agent(deleting_tool(), None, []) for _ in range(2))

    ids = {a.approval_ids.next() for a in (first, second) for _ in range(3)}

    assert len(ids) == 6
