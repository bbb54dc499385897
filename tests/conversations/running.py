"""Executing a run inside a test, on the test's own event loop."""

from __future__ import annotations

from conversations.runs.execution import execute_run


async def execute(run_id: int) -> str | None:
    """Execute the run to its end; its final status (None if it never started)."""
    return (await execute_run(run_id)).status
