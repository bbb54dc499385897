"""What the process's runtime (:mod:`core.runtime`) holds, its two ways to start, and
how each kind of process stops gracefully on SIGTERM (issue 44).

Built once when a process starts and closed when it stops, in reverse order of this list:
the run tasks close before the event writer, so the runs' last events are written.
"""

from __future__ import annotations

import asyncio
import logging

from conversations.live.eventlog import HeldChannel
from conversations.live.frames import LiveFrames
from conversations.runs.control import LoopControl
from conversations.runs.launcher import RunTasks, Sweeper
from conversations.runs.pacing import FramePacer
from conversations.runs.publisher import EventWriter
from conversations.runs.shutdown import Drained, drain
from conversations.runs.titling import TitleTasks
from core import runtime
from core.graceful import Deadline, OpenClients
from core.metrics import ProcessMetrics
from core.runtime import Runtime
from engine.llm.openai import ConnectionPool
from tools.builtin.python_exec import SandboxSlots
from tools.mcp.pool import MCPSessionPool

logger = logging.getLogger(__name__)

__all__ = ["build", "start_for_server", "start_for_worker", "stop_serving", "stop_working"]


def build(parts: Runtime, *, sweeps: bool = False) -> None:
    """Add every part (on the runtime's loop). ``sweeps``: an ASGI server's, which
    reports the runs whose process died."""
    parts.add(ProcessMetrics())
    parts.add(ConnectionPool())
    parts.add(MCPSessionPool())
    parts.add(SandboxSlots())
    parts.add(FramePacer())
    parts.add(EventWriter())
    parts.add(LoopControl())
    parts.add(HeldChannel())
    parts.add(LiveFrames())
    parts.add(OpenClients())
    parts.add(RunTasks())
    parts.add(TitleTasks())  # closed before the runs: a title call cut keeps the title
    if sweeps:
        parts.add(Sweeper()).start(parts.loop)


def start_for_server(loop: asyncio.AbstractEventLoop) -> Runtime:
    """The ASGI server's runtime, on its loop (embedded runs execute there); from the
    loop's thread, before or while it runs."""
    return runtime.start_on(loop, lambda parts: build(parts, sweeps=True), role="serving")


def start_for_worker() -> Runtime:
    """A Celery worker process's runtime, on a run loop of its own thread."""
    return runtime.start_in_thread(build)


async def stop_serving(deadline: Deadline) -> None:
    """An ASGI server's graceful stop, on its loop, once it stopped listening: the runs
    executing here (embedded mode) finish within the grace period or end saying the server
    restarted, seen live by the pages watching them; then every websocket closes with 4012
    and every event stream ends, so clients reconnect (to another server) and catch up
    from the log. The runtime closes afterwards, as the process ends."""
    await drain(finish_by=deadline.runs_until, end_by=deadline.ends_by)
    clients = runtime.part(OpenClients)
    count = await clients.close_all(timeout=deadline.left(deadline.exit_by))
    logger.info("closed %d live connections for the restart", count)


async def stop_working(deadline: Deadline) -> Drained:
    """A Celery worker's graceful stop, on its run loop, while Celery's warm shutdown
    waits for the tasks: runs finish within the grace period, or are handed back to
    another worker or ended (conversations/runs/handover.py); each task then returns."""
    return await drain(finish_by=deadline.runs_until, end_by=deadline.ends_by)
