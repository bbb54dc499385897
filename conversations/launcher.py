"""Where a run executes: the ASGI server's own loop (embedded) or a Celery worker (team).

Embedded mode keeps the in-memory channel layer and the consumers on one event loop: the
ASGI entry point binds that loop (:mod:`agentsite.serverloop`), and runs are created as
tasks on it (with a strong reference so they are not garbage-collected mid-run). Without a
bound loop (a Celery worker, management commands, a WSGI server) a private background loop
thread is used instead (uvloop unless configured otherwise, :mod:`agentsite.eventloop`):
every run of the process shares it.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from django.conf import settings

from agentsite import eventloop, serverloop
from engine import CancelToken

logger = logging.getLogger(__name__)

_tasks: dict[int, asyncio.Task] = {}
_tokens: dict[int, CancelToken] = {}
_lock = threading.Lock()
_fallback_loop: asyncio.AbstractEventLoop | None = None
_sweeper: asyncio.Task | None = None


SWEEP_INTERVAL = 60.0


async def _sweep_periodically() -> None:
    from asgiref.sync import sync_to_async

    from conversations.services import run_sweep_stale

    while True:
        await asyncio.sleep(SWEEP_INTERVAL)
        try:
            await sync_to_async(run_sweep_stale, thread_sensitive=False)()
        except Exception:  # keep sweeping; one DB hiccup is not fatal
            logger.exception("periodic sweep of stale runs failed")


def _target_loop() -> asyncio.AbstractEventLoop:
    global _fallback_loop
    server_loop = serverloop.get()
    if server_loop is not None:
        return server_loop
    with _lock:
        if _fallback_loop is None or _fallback_loop.is_closed():
            _fallback_loop = eventloop.new_event_loop()
            logger.info("runs execute on %s", eventloop.name_of(_fallback_loop))
            threading.Thread(
                target=_fallback_loop.run_forever, name="agentsite-runs", daemon=True
            ).start()
        return _fallback_loop


def is_process_run_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` is this process's own run loop (it lives as long as the process)."""
    return loop is _fallback_loop and not loop.is_closed()


def run_to_completion(run_id: int, task_id: str = "") -> str | None:
    """Execute a run on this process's run loop and wait for it (a Celery task's thread)."""
    from conversations.runner import execute_run

    coroutine = execute_run(run_id, task_id=task_id)
    future = asyncio.run_coroutine_threadsafe(coroutine, _target_loop())
    return future.result()


def launch(run_id: int) -> None:
    """Start executing a run (called after the creating transaction committed)."""
    if settings.AGENTSITE_EXECUTION == "celery":
        from conversations.tasks import run_agent

        run_agent.delay(run_id)  # the worker records its task id when it claims the run
        return
    token = CancelToken()
    with _lock:
        _tokens[run_id] = token
    loop = _target_loop()
    loop.call_soon_threadsafe(_start_task, run_id, token)


def _start_task(run_id: int, token: CancelToken) -> None:
    from conversations.runner import execute_run

    global _sweeper
    loop = asyncio.get_running_loop()
    if _sweeper is None or _sweeper.done() or _sweeper.get_loop() is not loop:
        # Runs execute on this loop, so it also sweeps runs whose worker died.
        _sweeper = loop.create_task(_sweep_periodically())
    task = loop.create_task(execute_run(run_id, token=token))
    _tasks[run_id] = task
    task.add_done_callback(lambda _t: _forget(run_id))


def _forget(run_id: int) -> None:
    with _lock:
        _tasks.pop(run_id, None)
        _tokens.pop(run_id, None)
        idle = not _tasks
    if idle and _sweeper is not None:
        # Nothing runs here any more; page loads and new posts still sweep.
        _sweeper.cancel()


def is_local(run_id: int) -> bool:
    with _lock:
        return run_id in _tokens


def cancel_local(run_id: int) -> bool:
    """Cancel an in-process run at once (the durable flag covers other processes)."""
    with _lock:
        token = _tokens.get(run_id)
    if token is None:
        return False
    token.cancel()
    return True


async def wait_for(run_id: int) -> None:
    """Await an embedded run started in this loop (tests and benchmarks)."""
    task = _tasks.get(run_id)
    if task is not None:
        await asyncio.shield(task)
