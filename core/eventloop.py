"""The event loops of the streaming processes.

``AGENTSITE_EVENT_LOOP`` chooses the loop runs execute on in a Celery worker:
``uvloop`` (the default: its scheduling, selector and transports are C, so each streamed
token costs less, docs/performance.md) or ``asyncio``.

``AGENTSITE_SERVER_EVENT_LOOP`` chooses the loop of ``agentsite-server`` (daphne's
reactor, and in embedded mode the runs' loop too): ``asyncio`` by default. Twisted
watches its sockets with ``add_reader``; on uvloop a socket error (a client's reset
connection) closes that watch without telling twisted (MagicStack/uvloop#552,
twisted/twisted#11904), so daphne never learns the client left and its stream runs on
for the life of the server. ``uvloop`` stays available for a server behind a proxy that
never resets connections.
"""

from __future__ import annotations

import asyncio

import environ
from django.core.exceptions import ImproperlyConfigured

CHOICES = ("uvloop", "asyncio")
DEFAULT = "uvloop"
SERVER_DEFAULT = "asyncio"


def configured(variable: str = "AGENTSITE_EVENT_LOOP", default: str = DEFAULT) -> str:
    """The configured loop's name (read from the environment: daphne picks its loop before
    Django's settings are loaded)."""
    name = environ.Env().str(variable, default=default).strip().lower()
    if name not in CHOICES:
        raise ImproperlyConfigured(f"{variable}={name!r} is not one of: {', '.join(CHOICES)}.")
    return name


def _uvloop():
    try:
        import uvloop
    except ImportError as exc:
        raise ImproperlyConfigured(
            "uvloop was chosen as an event loop but is not installed (a dependency of "
            "agentsite where it builds): set AGENTSITE_EVENT_LOOP=asyncio to run without it."
        ) from exc
    return uvloop


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new loop of the configured kind (a worker's run loop)."""
    return policy().new_event_loop()


def name_of(loop: asyncio.AbstractEventLoop) -> str:
    """The loop's class as the logs show it, e.g. ``uvloop.Loop``."""
    return f"{type(loop).__module__}.{type(loop).__qualname__}"


def policy(name: str | None = None) -> asyncio.AbstractEventLoopPolicy:
    """A policy whose loops are of the kind ``name`` (default: the runs' configured kind,
    also the test suite's)."""
    if (name or configured()) == "uvloop":
        return _uvloop().EventLoopPolicy()
    return asyncio.DefaultEventLoopPolicy()


def install_for_server() -> None:
    """Make ``asyncio.new_event_loop()`` build the server's kind from now on (daphne
    creates its reactor's loop that way when ``daphne.server`` is first imported)."""
    asyncio.set_event_loop_policy(policy(configured("AGENTSITE_SERVER_EVENT_LOOP", SERVER_DEFAULT)))
