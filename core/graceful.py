"""Stopping a process on SIGTERM without losing what its clients and runs were doing.

A restart (a deploy, ``systemctl restart``, ``docker compose up`` with a new image) sends
SIGTERM and waits a stop timeout before it kills. Within ``AGENTSITE_SHUTDOWN_GRACE_SECONDS``
of the signal the process stops taking work, lets what it runs finish or hands it back,
tells its clients where to go, and exits. :class:`Deadline` splits that time;
:class:`OpenClients` closes a server's long-lived connections so that their clients come
back (to another server) and catch up; :func:`on_sigterm_under_daphne` runs the steps on
daphne, before daphne's own shutdown cancels every connection's application.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from django.conf import settings

logger = logging.getLogger(__name__)

# The close code of a websocket closed because its server restarts: 1012 (service restart)
# in the private range, because daphne closes through autobahn's ``sendClose``, which takes
# only 1000 and 3000-4999 (daphne#374, autobahn-python#1642). The chat page reconnects on
# it as the ws extension does on 1012 (static/js/chat.js); an API client should too.
RESTART_CLOSE_CODE = 4012

# What runs may not use of the grace period: ending or handing back the ones still going,
# then closing connections. A fifth of the period, at most this many seconds.
RESERVE_SECONDS = 5.0


def grace_seconds() -> float:
    return max(0.0, float(settings.AGENTSITE_SHUTDOWN_GRACE_SECONDS))


@dataclass(frozen=True)
class Deadline:
    """The grace period from the signal on, in ``time.monotonic()`` seconds: runs may
    finish until :attr:`runs_until`, runs still going are ended or handed back until
    :attr:`ends_by`, and the process exits by :attr:`exit_by`."""

    started: float
    grace: float

    @classmethod
    def from_now(cls, grace: float | None = None) -> Deadline:
        return cls(time.monotonic(), grace_seconds() if grace is None else grace)

    @property
    def reserve(self) -> float:
        return min(RESERVE_SECONDS, self.grace / 5)

    @property
    def runs_until(self) -> float:
        return self.started + self.grace - self.reserve

    @property
    def ends_by(self) -> float:
        return self.started + self.grace - self.reserve / 2

    @property
    def exit_by(self) -> float:
        return self.started + self.grace

    @staticmethod
    def left(until: float) -> float:
        """Seconds from now until ``until`` (never negative)."""
        return max(0.0, until - time.monotonic())


Closer = Callable[[], Awaitable[None]]


class OpenClients:
    """The long-lived connections of a server (websockets, event streams), each with the
    way to close it that tells its client to come back: a websocket closes with
    :data:`RESTART_CLOSE_CODE`, on which the chat page reconnects and catches up, an event
    stream ends, and EventSource reconnects with ``Last-Event-ID``. A part of the
    process's runtime."""

    def __init__(self) -> None:
        self._closers: dict[int, Closer] = {}
        self._keys = itertools.count(1)
        self._gone: asyncio.Event | None = None  # set while no connection is open
        self.closing = False

    def __len__(self) -> int:
        return len(self._closers)

    def add(self, close: Closer) -> int:
        """Hold a connection's ``close`` until :meth:`discard`; the key to discard it. A
        connection opened while the server is closing them (a request already on its way)
        is closed at once."""
        key = next(self._keys)
        self._closers[key] = close
        if self._gone is not None:
            self._gone.clear()
        if self.closing:
            asyncio.ensure_future(_closed_quietly(close))
        return key

    def discard(self, key: int | None) -> None:
        """The connection is gone, however it ended."""
        gone = key is not None and self._closers.pop(key, None) is not None
        if gone and not self._closers and self._gone is not None:
            self._gone.set()

    async def close_all(self, timeout: float) -> int:
        """Close every connection, then wait (at most ``timeout``) until each is gone; the
        number closed."""
        self.closing = True
        closers = list(self._closers.values())
        if not closers:
            return 0
        self._gone = asyncio.Event()
        if not self._closers:
            self._gone.set()
        await asyncio.gather(*(_closed_quietly(close) for close in closers))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._gone.wait()
        if self._closers:
            logger.warning("%d connections were still open at the end of the grace period",
                           len(self._closers))  # fmt: skip
        return len(closers)


async def _closed_quietly(close: Closer) -> None:
    try:
        await close()
    except Exception:  # a connection that broke meanwhile is gone all the same
        logger.debug("closing a connection for the restart failed", exc_info=True)


def on_sigterm_under_daphne(
    loop: asyncio.AbstractEventLoop, stop_gracefully: Callable[[Deadline], Awaitable[None]]
) -> None:
    """Make SIGTERM stop daphne gracefully (call from the reactor's first call).

    Twisted's own handler stops the reactor at once, and daphne's "before shutdown"
    trigger then cancels every connection's application: websockets drop without a close
    code and runs are cut. Instead, the loop's handler (asyncio's ``add_signal_handler``)
    stops the listening ports (``IReactorFDSet.getReaders()`` providing
    ``IListeningPort``, then ``stopListening()``), awaits ``stop_gracefully`` within the
    grace period, then stops the reactor. A second SIGTERM stops it at once.
    """
    # Here: the reactor daphne installed when it was imported (importing it elsewhere
    # would install twisted's default one).
    from twisted.internet import error, reactor
    from twisted.internet.interfaces import IListeningPort

    stopping: list[asyncio.Task[None]] = []

    def stop_reactor() -> None:
        with contextlib.suppress(error.ReactorNotRunning):
            reactor.stop()  # type: ignore[attr-defined]

    async def stop(deadline: Deadline) -> None:
        ports = [r for r in reactor.getReaders() if IListeningPort.providedBy(r)]  # type: ignore[attr-defined]
        for port in ports:
            port.stopListening()
        logger.info(
            "SIGTERM: stopped listening on %d ports; exiting within %.0f s",
            len(ports),
            deadline.grace,
        )
        try:
            async with asyncio.timeout(deadline.left(deadline.exit_by)):
                await stop_gracefully(deadline)
        except TimeoutError:
            logger.warning("the graceful stop did not finish within the grace period")
        except Exception:
            logger.exception("the graceful stop failed")
        logger.info("stopped gracefully in %.1f s", time.monotonic() - deadline.started)
        stop_reactor()

    def on_sigterm() -> None:
        if stopping:
            logger.warning("SIGTERM again: stopping now")
            stop_reactor()
            return
        stopping.append(loop.create_task(stop(Deadline.from_now())))

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
        logger.warning("SIGTERM stops this server at once: no handler could be installed")
