"""The process's runtime as conversations builds it (conversations/runtime.py): every
long-lived object of the run loop is a part of it, and closing it loses no event."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from conversations import services
from conversations.live.eventlog import HeldChannel
from conversations.models import RunEvent
from conversations.runs.control import LoopControl
from conversations.runs.launcher import RunTasks, Sweeper
from conversations.runs.pacing import FramePacer
from conversations.runs.publisher import FLUSH_INTERVAL, EventWriter, RunPublisher
from core.runtime import NoRuntime, Runtime
from engine.events import AnswerDelta
from engine.llm.openai import ConnectionPool
from tools.builtin.python_exec import SandboxSlots
from tools.mcp.pool import MCPSessionPool

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_run_loops_objects_are_the_runtimes(runtime: Runtime):
    for kind in (
        ConnectionPool,
        MCPSessionPool,
        SandboxSlots,
        FramePacer,
        EventWriter,
        LoopControl,
        HeldChannel,
        RunTasks,
    ):
        assert isinstance(runtime.get(kind), kind)
    with pytest.raises(NoRuntime):
        runtime.get(Sweeper)  # a server's runtime sweeps; a worker's (and this one) not


async def test_closing_the_runtime_writes_the_events_still_waiting(user, no_launch, runtime):
    """A process that stops between two rounds of the event writer still logs what its
    runs sent (the round would have come ``FLUSH_INTERVAL`` later)."""

    def new_run() -> tuple[int, int]:
        conversation = services.conversation_create(owner=user)
        _, run, _ = services.message_post(conversation=conversation, user=user, content="hi")
        return conversation.pk, run.pk

    conversation_id, run_id = await sync_to_async(new_run)()
    publisher = RunPublisher(run_id=run_id, conversation_id=conversation_id, start_seq=0)
    await publisher.on_event(AnswerDelta("Hello"))
    await publisher.drain()
    assert FLUSH_INTERVAL > 0 and publisher.unwritten  # sent, waiting for the next round

    await runtime.aclose()

    rows = [row async for row in RunEvent.objects.filter(run_id=run_id)]
    assert [(row.channel, row.payload) for row in rows] == [
        ("answer", {"status": "delta", "content": "Hello"})
    ]
