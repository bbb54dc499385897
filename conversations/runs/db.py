"""ORM calls from coroutines (runs, event streams, the socket's catch-up).

Each call runs on a database thread, never on the event loop: a pool of
``AGENTSITE_DB_THREADS`` per process, so that hundreds of runs starting, closing and
heart-beating at once wait for a few more threads rather than for the loop's default
handful; the event log's writes have a thread of their own (:func:`log_db`), so a burst
of run starts never holds up the frames of the runs already streaming. channels'
``database_sync_to_async`` closes the thread's connections around every call: with
PostgreSQL's pool that is a check-out and a health check per call, and a run makes many.
Here a thread keeps its connection between calls and checks it as a request would
(Django's ``close_old_connections``) when it sat idle for a while, and after a call that
failed.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections

T = TypeVar("T")
logger = logging.getLogger(__name__)

# A connection idle this long is checked (its age, its health) before its next use.
RECHECK_AFTER_IDLE_SECONDS = 5.0
_thread = threading.local()


@functools.cache
def _executor(name: str, size: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"agentsite-{name}")


def db(function: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """``function`` as a coroutine function that runs on one of the database threads."""
    size = int(getattr(settings, "AGENTSITE_DB_THREADS", 16))
    return _on_thread(function, _executor("db", size))


def log_db(function: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """``function`` on the event log's own database thread."""
    return _on_thread(function, _executor("event-log", 1))


def _on_thread(
    function: Callable[..., T], executor: ThreadPoolExecutor
) -> Callable[..., Awaitable[T]]:
    def call(*args: Any, **kwargs: Any) -> T:
        last_used = getattr(_thread, "last_used", None)
        if last_used is None or time.monotonic() - last_used >= RECHECK_AFTER_IDLE_SECONDS:
            close_old_connections()
        try:
            return function(*args, **kwargs)
        except BaseException:
            close_old_connections()  # drop a connection the failure may have broken
            raise
        finally:
            _thread.last_used = time.monotonic()

    return sync_to_async(call, thread_sensitive=False, executor=executor)


DATABASE_OUTAGES = (OperationalError, InterfaceError)


async def patiently(
    call: Callable[[], Awaitable[T]], *, patience: float = 30.0, what: str = "a database write"
) -> T:
    """``call()``, tried again while the database is unreachable, for up to ``patience``
    seconds: a run's last write (its answer) should outlast a database restart rather
    than lose what the user just read."""
    deadline = time.monotonic() + patience
    delay = 0.25
    while True:
        try:
            return await call()
        except DATABASE_OUTAGES:
            if time.monotonic() + delay > deadline:
                raise
            logger.warning("%s failed (database unreachable): trying again in %.1fs", what, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
