"""Celery tasks (team mode): take ids, call the runner."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="conversations.run_agent", ignore_result=True, acks_late=False, bind=True)
def run_agent(self, run_id: int) -> str | None:
    """Execute a run in this worker; the same coroutine the embedded mode awaits.

    The task's thread only waits: the run executes on the process's one run loop, so all
    runs of a worker share one event loop, one channel-layer connection and the HTTP
    connection pools (a loop per task thread cost hundreds of loops fighting for the GIL).
    """
    from conversations.launcher import run_to_completion

    return run_to_completion(run_id, task_id=self.request.id or "")


@shared_task(name="conversations.sweep_stale_runs", ignore_result=True)
def sweep_stale_runs() -> int:
    from conversations.services import run_sweep_stale

    return run_sweep_stale()
