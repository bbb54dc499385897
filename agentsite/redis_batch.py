"""Redis commands from every coroutine of one event loop, sent in shared pipelines.

Why: redis-py spends tens of microseconds of CPU on each command's round trip, and a
streamed answer sends two commands per frame (the event-log tail's ``RPUSH`` and the
frame's ``PUBLISH``); channels_redis moreover sends every publish of a process behind one
lock, one round trip at a time. Here a coroutine queues its commands and awaits their
replies. While one pipeline is in flight, newly queued commands wait and leave together
in the next one: alone, a frame costs one round trip; under load, one round trip carries
the frames of many runs. Commands run in the order they were queued (one pipeline is in
flight at a time, on one connection).
"""

from __future__ import annotations

import asyncio
from typing import Any

import redis

from agentsite.resp import Command, Pipelined, pipelined
from engine.loops import PerLoop


class CommandBatcher:
    def __init__(self, connection: Pipelined) -> None:
        self._connection = connection
        self._queue: list[tuple[tuple[Command, ...], asyncio.Future[list[Any]]]] = []
        self._busy = False  # a pipeline is in flight (or being connected for)
        self._sender: asyncio.Task[None] | None = None  # held: the loop keeps weak references

    async def execute(self, *commands: Command) -> list[Any]:
        """Run ``commands`` in order, in the next pipeline; their replies, in order.

        Raises the first error reply among them (another caller's error is its own), or
        the connection error that failed the whole pipeline. With nothing in flight the
        caller sends its own commands at once (a frame of a lone stream costs no task and
        no extra loop turn); what is queued meanwhile leaves together when the replies
        come back.
        """
        if self._busy:
            future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
            self._queue.append((commands, future))
            return await future
        self._busy = True
        try:
            replies = await self._connection.execute(commands)
        finally:
            self._hand_over()
        error = next((reply for reply in replies if isinstance(reply, Exception)), None)
        if error is not None:
            raise error
        return replies

    def _hand_over(self) -> None:
        """The pipeline in flight is done: the queued commands go next, or nothing is busy."""
        if self._queue:
            self._sender = asyncio.create_task(self._send_queued())
        else:
            self._busy = False

    async def _send_queued(self) -> None:
        batch: list[tuple[tuple[Command, ...], asyncio.Future[list[Any]]]] = []
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                try:
                    replies = await self._connection.execute(
                        [command for commands, _future in batch for command in commands]
                    )
                except (redis.RedisError, OSError) as error:
                    _fail(batch, error)
                else:
                    _answer(batch, replies)
                batch = []
        finally:  # cancelled with the loop: nobody may wait forever
            self._busy = False
            for _commands, future in batch + self._queue:
                future.cancel()
            self._queue = []


def _answer(batch: list[tuple[tuple[Command, ...], asyncio.Future[list[Any]]]], replies) -> None:
    position = 0
    for commands, future in batch:
        own = replies[position : position + len(commands)]
        position += len(commands)
        if future.done():  # its caller was cancelled
            continue
        error = next((reply for reply in own if isinstance(reply, Exception)), None)
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(own)


def _fail(batch, error: BaseException) -> None:
    for _commands, future in batch:
        if not future.done():
            future.set_exception(error)


_batchers: PerLoop[dict[str, CommandBatcher]] = PerLoop(dict)


def batcher(url: str) -> CommandBatcher:
    """The running loop's batcher for the Redis server at ``url``."""
    per_url = _batchers.get()
    found = per_url.get(url)
    if found is None:
        found = per_url[url] = CommandBatcher(pipelined(url))
    return found
