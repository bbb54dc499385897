"""The process's runtime (core/runtime.py): built once, found from its loop, closed in
reverse order; code on a loop without one is told so."""

from __future__ import annotations

import asyncio
import threading

import pytest

from core import runtime as core_runtime
from core.runtime import NoRuntime


class Part:
    def __init__(self, name: str, closed: list[str]) -> None:
        self.name, self.closed = name, closed

    async def aclose(self) -> None:
        self.closed.append(self.name)


class First(Part):
    pass


class Second(Part):
    pass


class Broken(Part):
    async def aclose(self) -> None:
        raise OSError("cannot close")


async def test_parts_are_found_from_their_loop_and_closed_last_first(runtime: core_runtime.Runtime):
    """The suite's fixture runtime is this loop's; another loop of the process (a test's
    second runtime) holds its own parts, closed in reverse order even past a failure."""
    closed: list[str] = []
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def build(parts: core_runtime.Runtime) -> None:
        parts.add(First("first", closed))
        parts.add(Broken("broken", closed))
        parts.add(Second("second", closed))

    async def on_its_loop() -> core_runtime.Runtime:
        return core_runtime.start_on(loop, build, primary=False)

    other = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(on_its_loop(), loop))
    try:
        assert (
            core_runtime.current() is core_runtime.primary()
        )  # this loop: the fixture's, not other
        assert core_runtime.part_or_none(First) is None

        async def found() -> str:
            return core_runtime.part(First).name

        assert await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(found(), loop)) == "first"
        assert other in core_runtime.every()
        other.close_from_outside()
        assert closed == ["second", "first"]  # the broken one logged, the rest closed
        assert other not in core_runtime.every() and other.closed
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


async def test_a_loop_gets_one_runtime_and_a_process_one_primary(runtime: core_runtime.Runtime):
    with pytest.raises(RuntimeError, match="has a runtime already"):
        core_runtime.start_on(asyncio.get_running_loop(), lambda parts: None, primary=False)
    with pytest.raises(RuntimeError, match="primary runtime already"):
        core_runtime.start_in_thread(lambda parts: None)
    runtime.add(First("once", []))
    with pytest.raises(ValueError, match="already has a First"):
        runtime.add(First("twice", []))


def test_code_on_a_loop_without_a_runtime_is_told_what_starts_one():
    async def needs_one() -> None:
        core_runtime.part(First)

    with pytest.raises(NoRuntime, match="agentsite-server, the Celery worker"):
        asyncio.run(needs_one())
