"""Interpreter tuning for the processes that stream (the ASGI server, Celery workers)."""

from __future__ import annotations

import gc
import sys

from django.conf import settings
from django.urls import get_resolver

from engine.llm.openai import preload


def tune_for_streaming() -> None:
    """Hand the GIL over more often than CPython's default of every 5 ms.

    A streaming process has one event loop thread forwarding frames and other threads doing
    CPU work (sync views, ORM calls). With the default, a frame that is ready waits up to
    5 ms for the GIL at every hop it makes while a view renders, which is what a user sees
    as stutter and a slow first token.
    """
    interval_ms = float(settings.AGENTSITE_GIL_SWITCH_MS)
    if interval_ms > 0:
        sys.setswitchinterval(interval_ms / 1000)


# Young-generation collections once per this many new container objects (CPython: 700):
# most of a streaming process's objects die before a collection sees them, instead of
# being promoted to be walked again by the older generations.
YOUNG_COLLECTION_THRESHOLD = 10_000


# Compiled at start instead of by the first page or run that renders them.
WARM_TEMPLATES = (
    "conversations/partials.html",
    "conversations/detail.html",
    "conversations/list.html",
)


def warm_up(*, pages: bool = True) -> None:
    """Import and build now what the first requests and runs would otherwise load while a
    user waits: the LLM client's TLS context, and with ``pages`` (a web server: it renders
    the live frames) every view module and the chat templates. A worker renders nothing.
    Before :func:`tune_garbage_collection`, so all of it is frozen."""
    from django.template.loader import get_template

    if pages:
        get_resolver().url_patterns  # noqa: B018 (imports every view module now)
        for name in WARM_TEMPLATES:
            get_template(name)
    preload()


def tune_garbage_collection() -> None:
    """Leave everything the process allocated while starting out of later collections.

    A full garbage collection walks every tracked object, and a process with Django, the
    app (and Celery) loaded holds hundreds of thousands that live as long as it does:
    while it walks them, no frame moves. ``gc.freeze()`` moves them to the permanent
    generation; what is left to walk is what the process allocated since. Collected
    first, so no start-up garbage is kept. Young collections then run less often (see
    ``YOUNG_COLLECTION_THRESHOLD``).
    """
    gc.collect()
    gc.freeze()
    _young, *older = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *older)
