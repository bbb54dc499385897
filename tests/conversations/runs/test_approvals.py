"""A tool call that needs the user's approval, through the web layer: the run pauses
at the call, the page and the API show the request, the decision (from the page, the
API, or no decision in time) resumes the same run."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.test import override_settings

from conversations import services
from conversations.api.tokens import token_create
from conversations.models import Run, RunEvent, ToolApproval
from conversations.runs.publisher import conversation_group
from engine import Tool
from tests.conversations.running import execute
from tests.tools.conftest import TIME_SERVER_STDIO_ARGS
from tools.mcp.pool import mcp_sessions_close
from tools.mcp.services import amcp_server_refresh
from tools.models import MCPServer, ToolConfig
from tools.registry import register, spec_for_tool
from tools.services import toolconfig_sync, toolconfig_update

pytestmark = pytest.mark.django_db(transaction=True)

erased: list[str] = []
erasing = threading.Lock()


def _erase(path: str) -> str:
    with erasing:
        erased.append(path)
    return f"erased {path}"


register(
    spec_for_tool(
        Tool(
            name="erase",
            description="Erase a file (test tool).",
            parameters={
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
            func=_erase,
        )
    )
)


@pytest.fixture
def erase_needs_approval(db) -> None:
    erased.clear()
    toolconfig_sync()
    toolconfig_update(toolconfig=ToolConfig.objects.get(name="erase"), requires_confirmation=True)


def script_erase(llm_server) -> None:
    llm_server.push(
        {"tool_calls": [{"id": "call-1", "name": "erase", "arguments": {"path": "/notes"}}]},
        {"content": "Handled."},
        {"content": "Here is what happened."},
    )


async def watched_run(user, content: str):
    """A run of a new conversation, executing, and a channel in the conversation's group:
    (conversation, run, its task, layer, channel)."""
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content=content
    )
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(conversation_group(conversation.pk), channel)
    return conversation, run, asyncio.ensure_future(execute(run.pk)), layer, channel


async def started_run(user, llm_server):
    """A run paused at the erase call; the conversation's frames so far."""
    script_erase(llm_server)
    conversation, run, running, layer, channel = await watched_run(user, "erase my notes")
    frames = await frames_until_approval(layer, channel)
    # Logged before it showed: the user may answer at once, and answers are checked there.
    assert await RunEvent.objects.filter(run=run, channel="approval").aexists()
    return conversation, run, running, frames


def is_request(frame: dict) -> bool:
    return frame["channel"] == "approval" and frame["payload"]["status"] == "requested"


async def frames_until_approval(layer, channel) -> list[dict]:
    """The frames up to the next approval request (its ``call_id`` is the loop's own)."""
    frames: list[dict] = []
    while not any(is_request(f) for f in frames):
        frames.append(await asyncio.wait_for(layer.receive(channel), 10))
    return frames


def approval_id(frames: list[dict]) -> str:
    return next(f["payload"]["call_id"] for f in frames if is_request(f))


async def test_an_approved_call_runs_and_the_run_goes_on(
    user, client, chat_model, llm_server, no_launch, erase_needs_approval
):
    conversation, run, running, frames = await started_run(user, llm_server)
    call_id = approval_id(frames)
    card = frames[-1]["html"]
    assert "erase" in card and "/notes" in card and "needs your approval" in card
    assert f"/runs/{run.pk}/approvals/{call_id}/" in card and erased == []
    await sync_to_async(client.force_login)(user)
    # A reload while it waits shows the same card, buttons included.
    page = (await sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    assert f"/runs/{run.pk}/approvals/{call_id}/" in page

    response = await sync_to_async(client.post)(
        f"/runs/{run.pk}/approvals/{call_id}/", {"decision": "approve"}, HTTP_HX_REQUEST="true"
    )

    assert response.status_code == 200 and "Approved" in response.content.decode()
    assert await asyncio.wait_for(running, 10) == "succeeded"
    assert erased == ["/notes"]
    approval = await ToolApproval.objects.aget(run=run, call_id=call_id)
    assert approval.status == "approved" and approval.decided_by_id == user.pk
    statuses = [
        e.payload["status"]
        async for e in RunEvent.objects.filter(run=run, channel="approval").order_by("seq")
    ]
    assert statuses == ["requested", "approved"]
    again = await sync_to_async(client.post)(
        f"/runs/{run.pk}/approvals/{call_id}/", {"decision": "deny"}, HTTP_HX_REQUEST="true"
    )
    assert again.status_code == 409


async def test_a_denied_call_is_not_run_and_the_agent_is_told(
    user, client, chat_model, llm_server, no_launch, erase_needs_approval
):
    _, run, running, frames = await started_run(user, llm_server)
    await sync_to_async(client.force_login)(user)

    await sync_to_async(client.post)(
        f"/runs/{run.pk}/approvals/{approval_id(frames)}/",
        {"decision": "deny"},
        HTTP_HX_REQUEST="true",
    )

    assert await asyncio.wait_for(running, 10) == "succeeded"
    assert erased == []
    observation = llm_server.requests[1]["messages"][-1]["content"]
    assert "denied" in observation


@override_settings(AGENTSITE_APPROVAL_TIMEOUT_SECONDS=0.3)
async def test_no_answer_in_time_counts_as_a_refusal(
    user, chat_model, llm_server, no_launch, erase_needs_approval
):
    _, run, running, _ = await started_run(user, llm_server)

    assert await asyncio.wait_for(running, 10) == "succeeded"
    assert erased == []
    assert (await ToolApproval.objects.aget(run=run)).status == "expired"
    assert "did not answer" in llm_server.requests[1]["messages"][-1]["content"]


async def test_stop_while_waiting_ends_the_run_and_closes_the_request(
    user, chat_model, llm_server, no_launch, erase_needs_approval
):
    _, run, running, _ = await started_run(user, llm_server)

    await sync_to_async(services.run_cancel)(run=await Run.objects.aget(pk=run.pk))

    assert await asyncio.wait_for(running, 10) == "cancelled"
    assert erased == []
    assert (await ToolApproval.objects.aget(run=run)).status == "expired"


async def test_the_api_decides_and_refuses_what_it_must(
    user, other_user, client, chat_model, llm_server, no_launch, erase_needs_approval
):
    _, run, running, frames = await started_run(user, llm_server)
    call_id = approval_id(frames)
    _token, raw = await sync_to_async(token_create)(user=user, name="script")
    _other, stranger = await sync_to_async(token_create)(user=other_user, name="other")

    def decide(approval: str, body: object, key: str = raw):
        return client.post(
            f"/api/runs/{run.pk}/approvals/{approval}",
            body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )

    assert (await sync_to_async(decide)(call_id, {"approve": True}, stranger)).status_code == 404
    assert (await sync_to_async(decide)("nope", {"approve": True})).status_code == 404
    assert (await sync_to_async(decide)(call_id, {"approve": "yes"})).status_code == 400
    response = await sync_to_async(decide)(call_id, {"approve": True})

    assert response.status_code == 200
    assert response.json() == {"call_id": call_id, "status": "approved"}
    assert await asyncio.wait_for(running, 10) == "succeeded"
    assert erased == ["/notes"]
    assert (await sync_to_async(decide)(call_id, {"approve": False})).status_code == 409


async def test_a_follow_up_sent_while_waiting_is_taken_in_after_the_decision(
    user, client, chat_model, llm_server, no_launch, erase_needs_approval
):
    conversation, run, running, frames = await started_run(user, llm_server)
    call_id = approval_id(frames)
    followup, same_run, injected = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="only the old notes, please"
    )
    assert injected and same_run.pk == run.pk
    await sync_to_async(client.force_login)(user)

    await sync_to_async(client.post)(
        f"/runs/{run.pk}/approvals/{call_id}/", {"decision": "approve"}, HTTP_HX_REQUEST="true"
    )

    assert await asyncio.wait_for(running, 10) == "succeeded"
    after_tool = llm_server.requests[1]["messages"]
    assert any("only the old notes, please" in str(m.get("content")) for m in after_tool)


async def test_a_call_reusing_an_approved_call_id_is_asked_about_again(
    user, client, chat_model, llm_server, no_launch, erase_needs_approval
):
    """The model (a prompt injection) reuses the id of the call the user approved, for
    another path: it waits for a decision of its own, and runs only if it gets one."""
    llm_server.push(
        {"tool_calls": [{"id": "call-1", "name": "erase", "arguments": {"path": "/notes"}}]},
        {"tool_calls": [{"id": "call-1", "name": "erase", "arguments": {"path": "/etc"}}]},
        {"content": "Done."},
        {"content": "Done."},
    )
    _, run, running, layer, channel = await watched_run(user, "erase my notes")
    await sync_to_async(client.force_login)(user)

    first = approval_id(await frames_until_approval(layer, channel))
    await sync_to_async(client.post)(
        f"/runs/{run.pk}/approvals/{first}/", {"decision": "approve"}, HTTP_HX_REQUEST="true"
    )
    second_frames = await frames_until_approval(layer, channel)
    second = approval_id(second_frames)

    assert second != first and erased == ["/notes"]  # /etc waits: not run on the old yes
    request = next(f for f in second_frames if is_request(f))["payload"]
    assert request["tool_args"] == {"path": "/etc"}
    await sync_to_async(client.post)(
        f"/runs/{run.pk}/approvals/{second}/", {"decision": "deny"}, HTTP_HX_REQUEST="true"
    )
    assert await asyncio.wait_for(running, 10) == "succeeded"
    assert erased == ["/notes"]
    rows = [(a.tool_args["path"], a.status) async for a in ToolApproval.objects.filter(run=run)]
    assert rows == [("/notes", "approved"), ("/etc", "denied")]


@pytest.mark.parametrize(("decision", "runs"), [("approve", True), ("deny", False)])
async def test_an_mcp_servers_tools_wait_for_approval_when_its_row_says_so(
    user, client, chat_model, llm_server, no_launch, decision, runs
):
    """A real MCP server (mcp-server-time over stdio) marked as needing approval: its
    tool's call waits for the user, and runs only if approved."""
    server = await sync_to_async(MCPServer.objects.create)(
        name="clock", transport="stdio", command=sys.executable,
        args=list(TIME_SERVER_STDIO_ARGS), timeout=20, requires_confirmation=True,
    )  # fmt: skip
    await amcp_server_refresh(server)
    call = {"name": "clock__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}
    llm_server.push({"tool_calls": [{"id": "t1", **call}]}, {"content": "Noted."})
    _, run, running, layer, channel = await watched_run(user, "what time is it in Tokyo?")
    try:
        frames = await frames_until_approval(layer, channel)
        request = next(f for f in frames if is_request(f))["payload"]
        assert request["tool_name"] == "clock__get_current_time"
        assert len(llm_server.requests) == 1  # waiting: the tool has not answered
        await sync_to_async(client.force_login)(user)
        await sync_to_async(client.post)(
            f"/runs/{run.pk}/approvals/{request['call_id']}/",
            {"decision": decision},
            HTTP_HX_REQUEST="true",
        )
        assert await asyncio.wait_for(running, 30) == "succeeded"
    finally:
        await mcp_sessions_close()
    observation = llm_server.requests[1]["messages"][-1]["content"]
    assert ("Asia/Tokyo" in observation) == runs
    assert ("denied" in observation) == (not runs)
