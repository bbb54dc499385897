"""Celery application for team mode (``REDIS_URL`` set).

Without Redis the broker is in-memory and tasks run eagerly; the chat itself then runs on
the ASGI server's event loop instead (see conversations.runs.launcher).

SIGTERM is Celery's warm shutdown: it takes no new task and waits for the running ones.
Its ``worker_shutting_down`` signal starts the grace period on the run loop
(``conversations.runtime.stop_working``): runs finish within
``AGENTSITE_SHUTDOWN_GRACE_SECONDS``, or are handed back to another worker or ended, and
their tasks return. A prefork pool's children run their own loops, which the main
process's signal does not reach: their runs finish, or are swept after the kill.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from celery import Celery
from celery.concurrency import get_implementation
from celery.concurrency.prefork import TaskPool as PreforkPool
from celery.signals import (
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)

from core import runtime
from core.graceful import Deadline

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

app = Celery("agentsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _tune_worker(sender: object, **_kwargs: object) -> None:
    # Here, not at the top: every manage.py command and server imports this module (through
    # agentsite/__init__.py), and these modules load the LLM client (about 0.5 s).
    from core.checks import refuse_to_serve_misconfigured
    from core.tuning import tune_for_streaming

    refuse_to_serve_misconfigured()
    tune_for_streaming()
    if get_implementation(sender.pool_cls) is not PreforkPool:  # type: ignore[attr-defined]
        _start_runtime()  # the threads (or solo) pool: this process executes the tasks


@worker_process_init.connect
def _start_child_runtime(**_kwargs: object) -> None:
    # A prefork child (a thread started before the fork is not in it). The solo pool sends
    # this signal too, in the process worker_init already gave a runtime.
    if runtime.primary_or_none() is None:
        _start_runtime()


# How this process stops its runs gracefully, once it has a run loop (a list: set once).
_stop_runs: list[Callable[[], None]] = []


def _start_runtime() -> None:
    """The process's runtime: the run loop every task of this process executes on."""
    # Here, not at the top: see _tune_worker.
    from conversations.runtime import start_for_worker, stop_working

    started = start_for_worker()

    def stop_runs() -> None:
        asyncio.run_coroutine_threadsafe(stop_working(Deadline.from_now()), started.loop)

    _stop_runs[:] = [stop_runs]


@worker_shutting_down.connect
def _stop_runs_gracefully(how: str = "", **_kwargs: object) -> None:
    # Sent from the main process's signal handler: it only hands the work to the run loop.
    # A cold shutdown (SIGQUIT, or SIGTERM again) cancels the tasks: the sweep reports them.
    if how == "Warm" and _stop_runs:
        _stop_runs[0]()


@worker_shutdown.connect
@worker_process_shutdown.connect
def _close_runtime(**_kwargs: object) -> None:
    started = runtime.primary_or_none()
    if started is not None:
        started.close_from_outside()


@worker_ready.connect
def _freeze_worker_heap(**_kwargs: object) -> None:
    # Here, not at the top: see _tune_worker.
    from core.tuning import tune_garbage_collection, warm_up

    warm_up(pages=False)  # the worker sends events as data: the web servers render them
    tune_garbage_collection()
