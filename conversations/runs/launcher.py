"""Where a run executes: the ASGI server's loop (embedded) or a Celery worker (team).

Embedded runs are tasks on the server's loop, held by the process's runtime
(:class:`RunTasks`) until they end. Every ASGI server's runtime also sweeps runs whose
process died (:class:`Sweeper`), in both modes: a dead run is reported within
``AGENTSITE_RUN_STALE_SECONDS`` plus ``AGENTSITE_RUN_SWEEP_SECONDS``, whether or not a
worker is alive or anyone loads a page.
"""

from __future__ import annotations

import asyncio
import logging
import time

from celery import current_app
from django.conf import settings
from django.utils.translation import gettext as _
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import RedisError

from conversations.runs import lifecycle
from conversations.runs.db import DATABASE_OUTAGES, db
from conversations.runs.execution import execute_run
from core import runtime
from core.episodes import OutageLog
from knowledge import recovery

logger = logging.getLogger(__name__)

QUEUE_OUTAGES = (BrokerError, RedisError)
queue_unreachable = OutageLog("the task queue")

# The Celery task that executes a run in a worker (conversations/tasks.py).
RUN_AGENT_TASK = "conversations.run_agent"


def launch(run_id: int) -> bool:
    """Start executing a run (called after the transaction that created it committed).

    False when the task queue is unreachable, or in embedded mode when this process has
    no runtime (a management command): the run is then failed at once, saying so (the
    message that triggered it stays saved, and Retry starts it again), rather than left
    queued until the sweep gives up on it.
    """
    if settings.AGENTSITE_EXECUTION == "celery":
        try:
            # By name: the task module (conversations.tasks) is above this one. The worker
            # records the task id when it claims the run.
            current_app.send_task(RUN_AGENT_TASK, args=(run_id,))
        except QUEUE_OUTAGES as exc:
            queue_unreachable.failed(exc, doing=f"queueing run {run_id}")
            lifecycle.run_fail_unstarted(run_id, _(lifecycle.QUEUE_UNREACHABLE))
            return False
        queue_unreachable.recovered()
        return True
    runs = runtime.primary_or_none()
    if runs is None:  # embedded mode in a process that serves nothing (a command)
        logger.warning("run %s not started: this process has no runtime", run_id)
        lifecycle.run_fail_unstarted(run_id, _(lifecycle.NO_RUN_LOOP))
        return False
    runs.loop.call_soon_threadsafe(runs.get(RunTasks).start, run_id)
    return True


class RunTasks:
    """The runs executing on one event loop, each a task held until it ends (a part of the
    process's runtime). Closing it cancels the runs left, as the process's end would: the
    sweep reports them interrupted (issue 44 hands them over instead)."""

    def __init__(self) -> None:
        self.tasks: dict[int, asyncio.Task[None]] = {}

    def start(self, run_id: int) -> None:
        """On the loop: the run's task."""
        self.tasks[run_id] = asyncio.get_running_loop().create_task(self._execute(run_id))

    async def _execute(self, run_id: int) -> None:
        try:
            outcome = await execute_run(run_id)
        finally:
            self.tasks.pop(run_id, None)
        if outcome.followup_run_id is not None:
            launch(outcome.followup_run_id)

    async def wait_for(self, run_id: int) -> None:
        """Await a run started on this loop (tests and benchmarks)."""
        task = self.tasks.get(run_id)
        if task is not None:
            await asyncio.shield(task)

    async def aclose(self) -> None:
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Sweeper:
    """Sweeps stale runs from its loop now and every ``AGENTSITE_RUN_SWEEP_SECONDS`` (a
    part of an ASGI server's runtime; a period of 0 turns it off)."""

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """From the loop's thread (it may not run yet)."""
        if _sweep_period() > 0:
            self.task = loop.create_task(_sweep_periodically())

    async def aclose(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


async def _sweep_periodically() -> None:
    """Sweep once the database has taken writes for a whole stale period, and again after
    each outage: while it could not, live runs could not write their heartbeats either,
    and must get a stale period to write one before they are judged dead. A failed sweep
    counts as an outage (a full disk answers reads and refuses writes).

    In embedded mode, runs from before this process started have no owner whatever the
    database did: they are reported at the first look. Knowledge documents whose indexing
    lost its owner are queued again the same way (:mod:`knowledge.recovery`)."""
    sweep, check = db(lifecycle.run_sweep_stale), db(lifecycle.database_check)
    documents = db(recovery.documents_recover)
    reachable_since: float | None = None
    embedded = settings.AGENTSITE_EXECUTION == "embedded"
    while True:
        try:
            await check()
            now = time.monotonic()
            reachable_since = now if reachable_since is None else reachable_since
            if now - reachable_since >= lifecycle.stale_heartbeat().total_seconds():
                await sweep()
            elif embedded:
                await sweep(before=lifecycle.PROCESS_STARTED)
            if embedded:
                await documents(before=lifecycle.PROCESS_STARTED)
            elif now - reachable_since >= recovery.stale_period().total_seconds():
                await documents()
        except DATABASE_OUTAGES:  # logged once per outage by the database threads
            reachable_since = None
        except Exception:  # keep sweeping
            logger.exception("periodic sweep of stale runs failed")
            reachable_since = None
        await asyncio.sleep(_sweep_period() or 5.0)


def _sweep_period() -> float:
    return settings.AGENTSITE_RUN_SWEEP_SECONDS


async def wait_for(run_id: int) -> None:
    """Await an embedded run started on this loop (tests and benchmarks)."""
    await runtime.part(RunTasks).wait_for(run_id)
