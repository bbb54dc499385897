"""ORM access from coroutines (runs, event streams) without blocking the event loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

_executor: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def executor() -> ThreadPoolExecutor:
    """One bounded pool per process, shared by every run and stream.

    The loop's default executor is per event loop, and a Celery worker runs each run on
    its own loop: 200 concurrent runs meant hundreds of threads, each with its own
    PostgreSQL connection ("sorry, too many clients already" at 100). With this pool the
    runs of a process use at most ``AGENTSITE_DB_THREADS`` connections, each kept by its
    thread between calls (SQLite: persistent; PostgreSQL: taken from the process's pool,
    returned after a call that follows 5 s of idleness).
    """
    global _executor
    with _lock:
        if _executor is None:
            size = int(getattr(settings, "AGENTSITE_DB_THREADS", 16))
            _executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="agentsite-db")
        return _executor


# A connection idle this long is checked (max age, health) before its next use.
RECHECK_AFTER_IDLE_SECONDS = 5.0
_thread_state = threading.local()


def checked_connections(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` with this thread's connections checked like a request's would be.

    Django checks connections at every request's start and end; doing that around every
    call re-armed ``CONN_HEALTH_CHECKS``, one extra round trip per call (a run makes
    several, and its event log is written twice a second). Here a connection is checked
    when it sat idle for a while, and after a call that raised.
    """
    last_used = getattr(_thread_state, "last_used", None)
    if last_used is None or time.monotonic() - last_used >= RECHECK_AFTER_IDLE_SECONDS:
        close_old_connections()
    try:
        return fn(*args, **kwargs)
    except BaseException:
        close_old_connections()  # drop a connection the failure may have broken
        raise
    finally:
        _thread_state.last_used = time.monotonic()


def db(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run in a worker thread with checked connections (never on the event loop).

    Not ``thread_sensitive``: long runs must not queue behind every sync view on Django's
    one shared thread.
    """

    def call(*args: Any, **kwargs: Any) -> Any:
        return checked_connections(fn, *args, **kwargs)

    return sync_to_async(call, thread_sensitive=False, executor=executor())
