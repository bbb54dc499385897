"""Where a run executes: the ASGI server's loop (embedded) or a Celery worker (team).

Embedded runs are tasks on the server's loop (:mod:`conversations.runs.loops`), kept in a
strong reference until they end; while any run is executing, the loop also sweeps runs
whose process died.
"""

from __future__ import annotations

import asyncio
import logging

from django.conf import settings

from conversations.runs import lifecycle, loops
from conversations.runs.db import db
from conversations.runs.execution import execute_run

logger = logging.getLogger(__name__)

SWEEP_INTERVAL = 60.0

_tasks: dict[int, asyncio.Task] = {}
_sweeper: asyncio.Task | None = None


def launch(run_id: int) -> None:
    """Start executing a run (called after the transaction that created it committed)."""
    if settings.AGENTSITE_EXECUTION == "celery":
        from conversations.tasks import run_agent

        run_agent.delay(run_id)  # the worker records its task id when it claims the run
        return
    loops.run_loop().call_soon_threadsafe(_start, run_id)


def _start(run_id: int) -> None:
    """On the run loop: the run's task, and the sweeper while runs execute here."""
    global _sweeper
    loop = asyncio.get_running_loop()
    if _sweeper is None or _sweeper.done() or _sweeper.get_loop() is not loop:
        _sweeper = loop.create_task(_sweep_periodically())
    _tasks[run_id] = loop.create_task(_execute(run_id))


async def _execute(run_id: int) -> None:
    try:
        outcome = await execute_run(run_id)
    finally:
        _tasks.pop(run_id, None)
        if not _tasks and _sweeper is not None:
            _sweeper.cancel()  # page loads and new messages still sweep
    if outcome.followup_run_id is not None:
        launch(outcome.followup_run_id)


async def _sweep_periodically() -> None:
    sweep = db(lifecycle.run_sweep_stale)
    while True:
        await asyncio.sleep(SWEEP_INTERVAL)
        try:
            await sweep()
        except Exception:  # keep sweeping; one database hiccup is not fatal
            logger.exception("periodic sweep of stale runs failed")


async def wait_for(run_id: int) -> None:
    """Await an embedded run started on this loop (tests and benchmarks)."""
    task = _tasks.get(run_id)
    if task is not None:
        await asyncio.shield(task)
