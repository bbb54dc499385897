"""Executing a run inside a test, on the test's own event loop, and seeing its frames as
the web server renders them."""

from __future__ import annotations

from typing import Any

from conversations.live.frames import LiveFrames
from conversations.runs.execution import execute_run
from core import runtime


async def execute(run_id: int) -> str | None:
    """Execute the run to its end; its final status (None if it never started)."""
    return (await execute_run(run_id)).status


async def rendered(frames: list[dict[str, Any]]) -> list[str]:
    """The HTML frames a web server makes of these live events, in order."""
    live = runtime.part(LiveFrames)
    return [await live.html(frame) for frame in frames]
