"""The event loop the streaming processes run on, chosen by ``AGENTSITE_EVENT_LOOP``.

``uvloop`` (the default): the loop's scheduling, selector and transports are C, so each
streamed token costs the server less (docs/performance.md). ``asyncio`` keeps the
standard library's loop (platforms without uvloop, debugging).
"""

from __future__ import annotations

import asyncio

import environ
from django.core.exceptions import ImproperlyConfigured

CHOICES = ("uvloop", "asyncio")
DEFAULT = "uvloop"


def configured() -> str:
    """The configured loop's name (read from the environment: daphne picks its loop before
    Django's settings are loaded)."""
    name = environ.Env().str("AGENTSITE_EVENT_LOOP", default=DEFAULT).strip().lower()
    if name not in CHOICES:
        raise ImproperlyConfigured(
            f"AGENTSITE_EVENT_LOOP={name!r} is not one of: {', '.join(CHOICES)}."
        )
    return name


def _uvloop():
    try:
        import uvloop
    except ImportError as exc:
        raise ImproperlyConfigured(
            "AGENTSITE_EVENT_LOOP=uvloop needs the uvloop package (a dependency of agentsite "
            "where it builds); set AGENTSITE_EVENT_LOOP=asyncio to run without it."
        ) from exc
    return uvloop


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new loop of the configured kind (a worker's run loop)."""
    return policy().new_event_loop()


def name_of(loop: asyncio.AbstractEventLoop) -> str:
    """The loop's class as the logs show it, e.g. ``uvloop.Loop``."""
    return f"{type(loop).__module__}.{type(loop).__qualname__}"


def policy() -> asyncio.AbstractEventLoopPolicy:
    """A policy whose loops are of the configured kind (also the test suite's)."""
    if configured() == "uvloop":
        return _uvloop().EventLoopPolicy()
    return asyncio.DefaultEventLoopPolicy()


def install() -> None:
    """Make ``asyncio.new_event_loop()`` build the configured kind from now on (daphne
    creates its reactor's loop that way when ``daphne.server`` is first imported)."""
    asyncio.set_event_loop_policy(policy())
