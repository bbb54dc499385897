"""ORM calls from coroutines (runs, event streams, the socket's catch-up).

Each call runs on a thread of the event loop's executor, never on the loop. channels'
``database_sync_to_async`` closes the thread's connections around every call: with
PostgreSQL's pool that is a check-out and a health check per call, and a run makes many.
Here a thread keeps its connection between calls and checks it as a request would
(Django's ``close_old_connections``) when it sat idle for a while, and after a call that
failed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections

T = TypeVar("T")

# A connection idle this long is checked (its age, its health) before its next use.
RECHECK_AFTER_IDLE_SECONDS = 5.0
_thread = threading.local()


def db(function: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """``function`` as a coroutine function that runs on a database thread."""

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

    # Not thread-sensitive: runs must not queue behind one shared thread.
    return sync_to_async(call, thread_sensitive=False)
