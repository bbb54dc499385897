"""A tool call that needs the user's approval, through the web layer: the run pauses
at the call, the page and the API show the request, the decision (from the page, the
API, or no decision in time) resumes the same run."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.test import override_settings

from conversations import services
from conversations.http.tokens import token_create
from conversations.models import Run, RunEvent, ToolApproval
from conversations.runs.approvals import RunApprover, approval_open, approval_taken
from conversations.runs.control import RunControl
from conversations.runs.publisher import conversation_group, publish_events_sync
from engine import Tool
from engine.approval import ApprovalRequest, call_binding
from engine.cancel import CancelToken
from engine.events import Approval
from tests.conversations.running import execute, rendered
from tests.tools.conftest import TIME_SERVER_STDIO_ARGS
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
    card = (await rendered(frames))[-1]
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


@pytest.mark.parametrize("second_path", ["/etc", "/notes"])
async def test_a_call_reusing_an_approved_call_id_is_asked_about_again(
    user, client, chat_model, llm_server, no_launch, erase_needs_approval, second_path
):
    """The model (a prompt injection) reuses the id of the call the user approved, for
    another path or the same: it waits for a decision of its own, and runs only if it
    gets one."""
    llm_server.push(
        {"tool_calls": [{"id": "call-1", "name": "erase", "arguments": {"path": "/notes"}}]},
        {"tool_calls": [{"id": "call-1", "name": "erase", "arguments": {"path": second_path}}]},
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

    assert second != first and erased == ["/notes"]  # it waits: not run on the old yes
    request = next(f for f in second_frames if is_request(f))["payload"]
    assert request["tool_args"] == {"path": second_path}
    await sync_to_async(client.post)(
        f"/runs/{run.pk}/approvals/{second}/", {"decision": "deny"}, HTTP_HX_REQUEST="true"
    )
    assert await asyncio.wait_for(running, 10) == "succeeded"
    assert erased == ["/notes"]
    rows = [
        (a.tool_args["path"], a.status, a.binding)
        async for a in ToolApproval.objects.filter(run=run)
    ]
    assert rows == [
        ("/notes", "approved", call_binding("erase", {"path": "/notes"})),
        (second_path, "denied", call_binding("erase", {"path": second_path})),
    ]


async def logged_request(user, request: ApprovalRequest) -> Run:
    """A run (not executing) whose log holds ``request``, as the card shows it."""
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="erase my notes"
    )
    requested = Approval(
        "requested", request.call_id, request.tool_name, request.tool_args, request.reason
    )
    await sync_to_async(publish_events_sync)(run=run, events=[requested])
    return run


def approver_for(run: Run) -> RunApprover:
    return RunApprover(run.pk, RunControl(run.pk, token=CancelToken(), deliver=print))


NOTES = ApprovalRequest("approval-a1-1", "erase", {"path": "/notes"}, "It erases.")


@pytest.mark.parametrize(
    ("asking", "status"),
    [
        (NOTES, "approved"),
        (ApprovalRequest(NOTES.call_id, "erase", {"path": "/etc"}, "It erases."), "denied"),
        (ApprovalRequest(NOTES.call_id, "shred", {"path": "/notes"}, "It shreds."), "denied"),
    ],
)
async def test_a_decision_is_taken_only_by_the_call_it_was_made_on(user, no_launch, asking, status):
    """The user answered the card before the run saved its row (the decision makes the
    row, from the logged request): a call with that id takes it only if it is that very
    call, the same tool with the same arguments."""
    run = await logged_request(user, NOTES)
    decided = await sync_to_async(services.approval_decide)(
        run=run, call_id=NOTES.call_id, user=user, approve=True
    )
    assert decided.binding == NOTES.binding

    assert await approver_for(run)(asking) == status

    row = await ToolApproval.objects.aget(run=run)  # still the one decision, unchanged
    assert (row.tool_args, row.status, row.binding) == (
        {"path": "/notes"},
        "approved",
        NOTES.binding,
    )


async def test_an_id_the_run_asked_about_is_never_taken_again(user, no_launch):
    """Even the same call, asked again under an id already decided, is refused: a
    decision answers one request."""
    run = await logged_request(user, NOTES)
    await sync_to_async(services.approval_decide)(
        run=run, call_id=NOTES.call_id, user=user, approve=True
    )
    approver = approver_for(run)

    assert await approver(NOTES) == "approved"
    assert await approver(NOTES) == "denied"
    assert await ToolApproval.objects.filter(run=run).acount() == 1


async def test_a_row_bound_to_another_call_gives_no_decision_to_this_one(user, no_launch):
    """The run's own row, read back after the wait: another call under its id (another
    request reusing it) does not get its status."""
    run = await logged_request(user, NOTES)
    assert await sync_to_async(approval_open)(run_id=run.pk, request=NOTES) == "pending"
    await sync_to_async(services.approval_decide)(
        run=run, call_id=NOTES.call_id, user=user, approve=True
    )
    other = ApprovalRequest(NOTES.call_id, "erase", {"path": "/etc"}, "It erases.")

    assert await sync_to_async(approval_taken)(run_id=run.pk, request=NOTES) == "approved"
    assert await sync_to_async(approval_taken)(run_id=run.pk, request=other) == "denied"
    assert await sync_to_async(approval_open)(run_id=run.pk, request=other) == "denied"


NOTES_SERVER = Path(__file__).parents[2] / "tools" / "mcp_notes_server.py"


@pytest.mark.parametrize(("decision", "runs"), [("approve", True), ("deny", False)])
async def test_an_mcp_servers_tools_wait_for_approval_when_its_row_says_so(
    user, client, chat_model, llm_server, no_launch, tmp_path, decision, runs
):
    """A real MCP server over stdio whose tool writes a file, its row marked as needing
    approval: the call waits for the user (nothing written yet), and writes only if
    approved; denied, the file is never touched."""
    notes = tmp_path / "notes.txt"
    server = await sync_to_async(MCPServer.objects.create)(
        name="notes", transport="stdio", command=sys.executable,
        args=[str(NOTES_SERVER), str(notes)], timeout=20, requires_confirmation=True,
    )  # fmt: skip
    await amcp_server_refresh(server)
    call = {"name": "notes__write_note", "arguments": {"text": "buy milk"}}
    llm_server.push({"tool_calls": [{"id": "t1", **call}]}, {"content": "Noted."})
    _, run, running, layer, channel = await watched_run(user, "note: buy milk")
    frames = await frames_until_approval(layer, channel)
    request = next(f for f in frames if is_request(f))["payload"]
    assert (request["tool_name"], request["tool_args"]) == (call["name"], call["arguments"])
    assert not notes.exists()  # waiting: the server was not called
    await sync_to_async(client.force_login)(user)
    await sync_to_async(client.post)(
        f"/runs/{run.pk}/approvals/{request['call_id']}/",
        {"decision": decision},
        HTTP_HX_REQUEST="true",
    )
    assert await asyncio.wait_for(running, 30) == "succeeded"
    observation = llm_server.requests[1]["messages"][-1]["content"]
    if runs:
        assert notes.read_text() == "buy milk\n" and "noted: buy milk" in observation
    else:
        assert not notes.exists() and "denied" in observation


async def test_an_mcp_tool_ticked_on_its_servers_row_waits_and_the_others_do_not(
    user, client, chat_model, llm_server, no_launch
):
    """The server's switch off, one of its tools ticked: a reply calling both runs the
    other at once and asks only about the ticked one (denied here: never run)."""
    server = await sync_to_async(MCPServer.objects.create)(
        name="clock", transport="stdio", command=sys.executable,
        args=list(TIME_SERVER_STDIO_ARGS), timeout=20, confirm_tools=["convert_time"],
    )  # fmt: skip
    await amcp_server_refresh(server)
    convert = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    llm_server.push(
        {
            "tool_calls": [
                {
                    "id": "t1",
                    "name": "clock__get_current_time",
                    "arguments": {"timezone": "Asia/Tokyo"},
                },
                {"id": "t2", "name": "clock__convert_time", "arguments": convert},
            ]
        },
        {"content": "Noted."},
    )
    _, run, running, layer, channel = await watched_run(user, "Tokyo time, and noon UTC there?")
    frames = await frames_until_approval(layer, channel)
    request = next(f for f in frames if is_request(f))["payload"]
    assert (request["tool_name"], request["tool_args"]) == ("clock__convert_time", convert)
    await sync_to_async(client.force_login)(user)
    await sync_to_async(client.post)(
        f"/runs/{run.pk}/approvals/{request['call_id']}/",
        {"decision": "deny"},
        HTTP_HX_REQUEST="true",
    )
    assert await asyncio.wait_for(running, 30) == "succeeded"
    results = {
        m["tool_call_id"]: m["content"]
        for m in llm_server.requests[1]["messages"]
        if m["role"] == "tool"
    }
    assert "Asia/Tokyo" in results["t1"] and "denied" not in results["t1"]
    assert "denied" in results["t2"] and "12:00" not in results["t2"]
    assert [a.tool_name async for a in ToolApproval.objects.filter(run=run)] == [
        "clock__convert_time"
    ]
