"""A run as the team stack's database and logs show it, shared by the team-mode tests."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from tests.integration.stack import Stack, async_wait_for


def tag(prefix: str) -> str:
    """A marker unique to one test, matched by the scripted server's rules."""
    return f"{prefix}-{secrets.token_hex(3)}"


async def run_row(stack: Stack, run_id: int) -> dict[str, Any]:
    rows = await asyncio.to_thread(
        stack.query,
        "SELECT status, mode, task_id, error FROM conversations_run WHERE id = %s",
        run_id,
    )
    status, mode, task_id, error = rows[0]
    return {"status": status, "mode": mode, "task_id": task_id, "error": error}


async def run_ends(stack: Stack, run_id: int, *, timeout: float = 20) -> dict[str, Any]:
    async def ended() -> dict[str, Any] | None:
        row = await run_row(stack, run_id)
        return row if row["status"] not in ("queued", "running") else None

    return await async_wait_for(
        ended, timeout=timeout, what=f"run {run_id} to end", detail=stack.logs
    )


async def worker_logged(stack: Stack, text: str, *, timeout: float = 10) -> None:
    worker = stack.worker
    assert worker is not None
    await async_wait_for(
        lambda: text in worker.text(),
        timeout=timeout,
        what=f"{text!r} in the worker log",
        detail=stack.logs,
    )
