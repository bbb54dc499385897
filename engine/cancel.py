"""Cancellation token shared between the agent loop and whoever may press Stop.

``cancel()`` is safe from any thread. Work that must stop promptly (an HTTP request in
flight, a tool call) is raced against the token with :func:`run_cancellable`, which cancels
the inner task, so httpx closes the upstream connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["CancelToken", "CancelledRun", "run_cancellable"]

T = TypeVar("T")


class CancelledRun(Exception):
    """Raised inside the loop when its token was cancelled."""


class CancelToken:
    def __init__(self) -> None:
        self._flag = threading.Event()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self._flag.is_set()

    def cancel(self) -> None:
        with self._lock:
            self._flag.set()
            waiters = list(self._waiters)
        for loop, event in waiters:
            if loop.is_closed():
                continue
            with contextlib.suppress(RuntimeError):  # loop closed since the check
                loop.call_soon_threadsafe(event.set)

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise CancelledRun("cancelled")

    async def wait(self) -> None:
        """Return once the token is cancelled."""
        event = asyncio.Event()
        entry = (asyncio.get_running_loop(), event)
        with self._lock:
            if self._flag.is_set():
                return
            self._waiters.append(entry)
        try:
            await event.wait()
        finally:
            with self._lock:
                if entry in self._waiters:
                    self._waiters.remove(entry)


async def run_cancellable(awaitable: Awaitable[T], token: CancelToken | None) -> T:
    """Await ``awaitable`` unless ``token`` fires first; then cancel it and raise.

    A token that fired already disposes of ``awaitable`` unstarted (no coroutine is left
    never awaited)."""
    if token is None:
        return await awaitable
    if token.cancelled:
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        elif isinstance(awaitable, asyncio.Future):
            awaitable.cancel()
        raise CancelledRun("cancelled")
    work = asyncio.ensure_future(awaitable)
    waiter = asyncio.ensure_future(token.wait())
    try:
        done, _ = await asyncio.wait({work, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        work.cancel()
        waiter.cancel()
        raise
    if work in done:
        waiter.cancel()
        return work.result()
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):  # result discarded
        await work
    raise CancelledRun("cancelled")
