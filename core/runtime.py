"""The process's runtime: the long-lived objects of the event loop its runs execute on.

Connection pools, the event writer, the frame pacer, the run controls, the sweeper and
the run tasks belong to one event loop and live as long as the process. They are built
in one place when the process starts (``agentsite-server`` when its reactor starts, an
ASGI server that speaks the lifespan protocol at ``lifespan.startup``, a Celery worker
process at ``worker_process_init``) and closed when it stops, in reverse order. Code
finds them with :func:`part`: the running loop's runtime's object of that kind.

The apps say what a runtime holds (``conversations.runtime`` assembles it); this module
knows only that a part may have an ``aclose()``. A loop without a runtime (a sync view's
throwaway loop, a management command) gets ``None`` from :func:`part_or_none` and works
without the shared object (a one-off connection), or :class:`NoRuntime` from
:func:`part` where nothing can work without it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from core import eventloop

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Closing gives the parts this long in all before the loop goes on without them.
CLOSE_TIMEOUT = 10.0


class NoRuntime(RuntimeError):
    """Code that needs the process's runtime ran on a loop that has none."""


class Runtime:
    """The parts of one event loop, in the order they were added (closed in reverse)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        primary: bool,
        thread: threading.Thread | None = None,
    ) -> None:
        self.loop = loop
        self.primary = primary  # the process's run loop: where launched runs execute
        self._parts: dict[type, Any] = {}
        self._thread = thread  # the loop's thread, if this runtime made it
        self.closed = False

    def add(self, item: T) -> T:
        """Hold ``item`` as this runtime's part of its class."""
        if type(item) in self._parts:
            raise ValueError(f"this runtime already has a {type(item).__name__}")
        self._parts[type(item)] = item
        return item

    def get(self, kind: type[T]) -> T:
        try:
            return self._parts[kind]
        except KeyError:
            raise NoRuntime(f"this runtime has no {kind.__name__}") from None

    def find(self, kind: type[T]) -> T | None:
        return self._parts.get(kind)

    def submit(self, coroutine: Awaitable[T]) -> Future[T]:
        """Schedule ``coroutine`` on this runtime's loop from any thread."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        """Close every part (last added first) on this runtime's loop; a part that fails to
        close is logged and the others still close."""
        if self.closed:
            return
        self.closed = True
        _forget(self)
        for item in reversed(list(self._parts.values())):
            close = getattr(item, "aclose", None)
            if close is None:
                continue
            try:
                async with asyncio.timeout(CLOSE_TIMEOUT):
                    await close()
            except Exception:
                logger.exception("closing the runtime's %s failed", type(item).__name__)
        self._parts.clear()

    def close_from_outside(self) -> None:
        """Close from another thread, then stop the loop's thread if this runtime made it."""
        if self.loop.is_running():
            self.submit(self.aclose()).result(CLOSE_TIMEOUT * 2)
        if self._thread is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(CLOSE_TIMEOUT)
            self.loop.close()


_runtimes: dict[asyncio.AbstractEventLoop, Runtime] = {}
_lock = threading.Lock()


def start_on(
    loop: asyncio.AbstractEventLoop,
    build: Callable[[Runtime], None],
    *,
    primary: bool = True,
    thread: threading.Thread | None = None,
    role: str = "runs execute",
) -> Runtime:
    """A runtime for ``loop`` with the parts ``build`` adds (from the loop's thread)."""
    runtime = Runtime(loop, primary=primary, thread=thread)
    build(runtime)
    with _lock:
        if loop in _runtimes:
            raise RuntimeError("this event loop has a runtime already")
        if primary and any(r.primary for r in _runtimes.values()):
            raise RuntimeError("this process has a primary runtime already")
        _runtimes[loop] = runtime
    logger.info("%s on %s", role, eventloop.name_of(loop))  # e.g. "serving on uvloop.Loop"
    return runtime


def start_in_thread(build: Callable[[Runtime], None], *, name: str = "agentsite-runs") -> Runtime:
    """A new event loop of the configured kind in a thread of its own, and its runtime (a
    Celery worker's run loop; a test session's)."""
    loop = eventloop.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name=name, daemon=True)
    thread.start()

    async def build_on_loop() -> Runtime:
        return start_on(loop, build, thread=thread)

    try:
        return asyncio.run_coroutine_threadsafe(build_on_loop(), loop).result(CLOSE_TIMEOUT)
    except BaseException:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(CLOSE_TIMEOUT)
        loop.close()
        raise


def _forget(runtime: Runtime) -> None:
    with _lock:
        if _runtimes.get(runtime.loop) is runtime:
            del _runtimes[runtime.loop]


def current() -> Runtime | None:
    """The running loop's runtime, if it has one."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return _runtimes.get(loop)


def part(kind: type[T]) -> T:
    """The running loop's runtime's part of class ``kind``."""
    runtime = current()
    if runtime is None:
        raise NoRuntime(
            f"no runtime on this event loop to give a {kind.__name__}: agentsite-server, the "
            "Celery worker and the tests' `runtime` fixture start one"
        )
    return runtime.get(kind)


def part_or_none(kind: type[T]) -> T | None:
    runtime = current()
    return runtime.find(kind) if runtime is not None else None


def primary() -> Runtime:
    """The process's run loop's runtime (from any thread)."""
    with _lock:
        for runtime in _runtimes.values():
            if runtime.primary:
                return runtime
    raise NoRuntime(
        "this process has no runtime to execute runs on: agentsite-server and the Celery "
        "worker start one when they start; tests use the `runtime` fixture"
    )


def primary_or_none() -> Runtime | None:
    try:
        return primary()
    except NoRuntime:
        return None


def every() -> list[Runtime]:
    """Every runtime of the process (a test process may hold a loop's besides the primary)."""
    with _lock:
        return list(_runtimes.values())
