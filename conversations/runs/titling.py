"""When a conversation gets its automatic title, and how its open pages hear of it.

A run whose answer succeeded hands its id to :func:`after_answer` as its very last step,
once its final events are sent and written: the answer is complete on the page before
the title call starts. The title is then made (:mod:`conversations.titles`) by a task of
its own on the same run loop (:class:`TitleTasks`): the ASGI server's in embedded mode,
the worker's in team mode, where the Celery task has returned by then and the call takes
no task slot. Nothing it does changes the run: its status was written before.

The new title is a ``title`` event of the answering run, published like a sweep's report
(:func:`~conversations.runs.publisher.publish_events_sync`), so pages show it live and a
reconnecting page catches up with it. While another run of the conversation is streaming
the title is saved but not announced: that run's events are numbered from a block it
reserved before, and readers drop frames numbered below one they have seen.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

from django.conf import settings

from conversations import titles
from conversations.models import Run
from conversations.runs.db import db
from conversations.runs.publisher import publish_events_sync
from core import runtime
from engine import Usage
from engine.events import AgentEvent
from llms.services import usage_record

__all__ = ["TitleChanged", "TitleTasks", "after_answer", "title_after_answer", "wait_for"]

logger = logging.getLogger(__name__)


@dataclass
class TitleChanged(AgentEvent):
    """The conversation's automatic title (the app's event: the engine knows no titles)."""

    title: str
    channel: ClassVar[str] = "title"

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title}


class TitleTasks:
    """The title calls under way on one event loop (a part of the process's runtime).
    Closing it cancels them: their conversations keep the titles they have."""

    def __init__(self) -> None:
        self.tasks: dict[int, asyncio.Task[str | None]] = {}
        self.closed = False

    def start(self, run_id: int) -> None:
        """On the loop: the title task after run ``run_id``'s answer."""
        if self.closed or run_id in self.tasks:
            return
        task = asyncio.get_running_loop().create_task(title_after_answer(run_id))
        self.tasks[run_id] = task
        task.add_done_callback(lambda _task: self.tasks.pop(run_id, None))

    async def wait_for(self, run_id: int) -> None:
        task = self.tasks.get(run_id)
        if task is not None:
            await asyncio.shield(task)

    async def aclose(self) -> None:
        self.closed = True
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def after_answer(run_id: int) -> None:
    """A run's answer succeeded and its last events are out (on the run's loop): title
    the conversation if that was its first answer, in the background."""
    if not settings.AGENTSITE_AUTO_TITLES:
        return
    tasks = runtime.part_or_none(TitleTasks)
    if tasks is not None:  # a loop without a runtime titles nothing
        tasks.start(run_id)


async def wait_for(run_id: int) -> None:
    """Await the title task after ``run_id`` on this loop, if there is one (tests)."""
    tasks = runtime.part_or_none(TitleTasks)
    if tasks is not None:
        await tasks.wait_for(run_id)


async def title_after_answer(run_id: int) -> str | None:
    """Make, save and announce the title after ``run_id``'s answer; the new title, or
    None when the conversation keeps the one it has. Never raises (but is cancellable)."""
    try:
        job = await db(titles.title_job)(run_id)
        if job is None:
            return None
        reply = await titles.title_reply(job)
        if reply.usage is not None:
            await db(_count_usage)(job, reply.usage)
        if not reply.title:
            return None
        saved = await db(_save_and_announce)(run_id, reply.title)
    except asyncio.CancelledError:
        raise
    except Exception:  # a title is a nicety: the conversation keeps the one it has
        logger.exception("the title after run %s failed", run_id)
        return None
    if saved:
        logger.info("conversation %s titled after run %s", job.conversation_id, run_id)
    return reply.title if saved else None


def _count_usage(job: titles.TitleJob, usage: Usage) -> None:
    """The title call's tokens count towards its owner's usage (no run of its own)."""
    usage_record(user=job.owner, model=job.model, usage=usage, runs=0)


def _save_and_announce(run_id: int, title: str) -> bool:
    """Save the title and publish its event in one transaction under the conversation's
    row lock (no event while another run streams); whether the title was saved."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None:  # the conversation was deleted meanwhile
        return False
    saved = False

    def save() -> bool:
        nonlocal saved
        saved = titles.title_save(conversation_id=run.conversation_id, title=title)
        streaming = Run.objects.filter(
            conversation_id=run.conversation_id, status=Run.Status.RUNNING
        ).exists()
        return saved and not streaming

    publish_events_sync(run=run, events=[TitleChanged(title)], check=save)
    return saved
