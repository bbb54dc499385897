"""Celery tasks (team mode): take ids, execute on the worker's run loop."""

from __future__ import annotations

from celery import shared_task

from conversations.runs import launcher
from conversations.runs.execution import execute_run
from core import runtime


@shared_task(name=launcher.RUN_AGENT_TASK, ignore_result=True, acks_late=False, bind=True)
def run_agent(self, run_id: int) -> str | None:
    """Execute a run in this worker; the same coroutine the embedded mode awaits.

    The task's thread only waits: every run of a worker executes on its runtime's loop, so
    they share the event loop, the channel-layer connection and the LLM connection pool.
    """
    running = execute_run(run_id, task_id=self.request.id or "")
    outcome = runtime.primary().submit(running).result()
    if outcome.handed_back:
        # This worker is stopping and takes no task any more: another one goes on with it
        # (conversations/runs/handover.py), or it fails saying the queue is not answering.
        launcher.launch(run_id)
    elif outcome.followup_run_id is not None:
        launcher.launch(outcome.followup_run_id)  # or failed, saying so, if it can't queue
    return outcome.status
