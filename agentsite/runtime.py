"""Interpreter tuning for the processes that stream (the ASGI server, Celery workers)."""

from __future__ import annotations

import sys

from django.conf import settings


def tune_for_streaming() -> None:
    """Hand the GIL over more often than CPython's default of every 5 ms.

    A streaming process has one event loop thread forwarding frames and other threads doing
    CPU work (sync views, ORM calls). With the default, a frame that is ready waits up to
    5 ms for the GIL at every hop it makes while a view renders, which is what a user sees
    as stutter and a slow first token.
    """
    interval_ms = float(getattr(settings, "AGENTSITE_GIL_SWITCH_MS", 1.0))
    if interval_ms > 0:
        sys.setswitchinterval(interval_ms / 1000)
