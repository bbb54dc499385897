"""What the process's runtime (:mod:`core.runtime`) holds, and its two ways to start.

Built once when a process starts and closed when it stops, in reverse order of this list:
the run tasks close before the event writer, so the runs' last events are written.
"""

from __future__ import annotations

import asyncio

from conversations.live.eventlog import HeldChannel
from conversations.live.frames import LiveFrames
from conversations.runs.control import LoopControl
from conversations.runs.launcher import RunTasks, Sweeper
from conversations.runs.pacing import FramePacer
from conversations.runs.publisher import EventWriter
from core import runtime
from core.metrics import ProcessMetrics
from core.runtime import Runtime
from engine.llm.openai import ConnectionPool
from tools.builtin.python_exec import SandboxSlots
from tools.mcp.pool import MCPSessionPool

__all__ = ["build", "start_for_server", "start_for_worker"]


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
    parts.add(RunTasks())
    if sweeps:
        parts.add(Sweeper()).start(parts.loop)


def start_for_server(loop: asyncio.AbstractEventLoop) -> Runtime:
    """The ASGI server's runtime, on its loop (embedded runs execute there); from the
    loop's thread, before or while it runs."""
    return runtime.start_on(loop, lambda parts: build(parts, sweeps=True), role="serving")


def start_for_worker() -> Runtime:
    """A Celery worker process's runtime, on a run loop of its own thread."""
    return runtime.start_in_thread(build)
