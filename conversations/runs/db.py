"""ORM calls from coroutines (runs, event streams, the socket's catch-up).

Each call runs on a database thread, never on the event loop: a pool of
``AGENTSITE_DB_THREADS`` per process, so that hundreds of runs starting, closing and
heart-beating at once wait for a few more threads rather than for the loop's default
handful; the event log's writes have a thread of their own (:func:`log_db`), so a burst
of run starts never holds up the frames of the runs already streaming. channels'
``database_sync_to_async`` closes the thread's connections around every call: with
PostgreSQL's pool that is a check-out and a health check per call, and a run makes many.
Here a thread keeps its connection between calls.

A kept connection can die with the server (a restart kills every one of them). The first
call that meets a dead connection fails; from then on every thread gives its connections
back before its next call (:class:`ConnectionGenerations`), so that call takes one the
way a request does: from Django's connection pool, whose connections psycopg's pool
checks before handing them out (``CONN_HEALTH_CHECKS``), or a new one without a pool.
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
from django.db import InterfaceError, OperationalError, close_old_connections, connections

from core.episodes import OutageLog

T = TypeVar("T")
logger = logging.getLogger(__name__)

DATABASE_OUTAGES = (OperationalError, InterfaceError)


class ConnectionGenerations:
    """Which connections may be dead: a failure of the database bumps the generation, and
    a thread whose connections are older hands them back before it uses them again."""

    def __init__(self) -> None:
        self._current = 0
        self._lock = threading.Lock()
        self._seen = threading.local()

    def outage(self) -> None:
        with self._lock:
            self._current += 1

    def refresh_if_stale(self) -> None:
        """Give back this thread's connections if an outage happened since they were
        taken (their next query takes a checked one)."""
        current = self._current
        if getattr(self._seen, "generation", current) != current:
            connections.close_all()
        self._seen.generation = current


generations = ConnectionGenerations()
unreachable = OutageLog("the database")


@functools.cache
def _executor(name: str, size: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"agentsite-{name}")


def db(function: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """``function`` as a coroutine function that runs on one of the database threads."""
    return _on_thread(function, _executor("db", settings.AGENTSITE_DB_THREADS))


def log_db(function: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """``function`` on the event log's own database thread."""
    return _on_thread(function, _executor("event-log", 1))


def on_database_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call ``function`` as a database thread does: with connections no outage has
    touched since they were taken, and a failure's broken connection dropped."""
    generations.refresh_if_stale()
    try:
        result = function(*args, **kwargs)
    except DATABASE_OUTAGES as exc:
        generations.outage()
        close_old_connections()
        unreachable.failed(exc, doing=getattr(function, "__qualname__", "a query"))
        raise
    except BaseException:
        close_old_connections()  # drop a connection the failure may have broken
        raise
    unreachable.recovered()
    return result


def _on_thread(
    function: Callable[..., T], executor: ThreadPoolExecutor
) -> Callable[..., Awaitable[T]]:
    call = functools.partial(on_database_thread, function)
    return sync_to_async(call, thread_sensitive=False, executor=executor)


async def patiently(
    call: Callable[[], Awaitable[T]], *, patience: float = 30.0, what: str = "a database write"
) -> T:
    """``call()``, tried again while the database is unreachable, for up to ``patience``
    seconds: a run's last write (its answer) should outlast a database restart rather
    than lose what the user just read. The database threads log the outage, once."""
    deadline = time.monotonic() + patience
    delay = 0.25
    while True:
        try:
            return await call()
        except DATABASE_OUTAGES:
            if time.monotonic() + delay > deadline:
                raise
            logger.debug("%s failed (database unreachable): trying again in %.1fs", what, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
