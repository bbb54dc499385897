"""ORM access from coroutines (runs, event streams) without blocking the event loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections


def db(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run in a worker thread with fresh connections (never on the event loop).

    Not ``thread_sensitive``: long runs must not queue behind every sync view on Django's
    one shared thread.
    """

    def call(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(call, thread_sensitive=False)
