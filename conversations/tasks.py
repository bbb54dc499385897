"""Celery tasks (team mode): take ids, call the runner."""

from __future__ import annotations

import asyncio

from celery import shared_task


@shared_task(name="conversations.run_agent", ignore_result=True, acks_late=False)
def run_agent(run_id: int) -> str | None:
    """Execute a run in this worker; the same coroutine the embedded mode awaits."""
    from conversations.runner import execute_run

    return asyncio.run(execute_run(run_id))


@shared_task(name="conversations.sweep_stale_runs", ignore_result=True)
def sweep_stale_runs() -> int:
    from conversations.services import run_sweep_stale

    return run_sweep_stale()
