"""One object per running event loop: connections, pools and timers belong to one loop."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    """``get()`` returns the running loop's instance, made by ``factory`` on first use.

    An ASGI server has one loop, a Celery worker one run loop, tests a loop each; a closed
    loop's instance goes with the loop (weak keys).
    """

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._items: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        item = self._items.get(loop)
        if item is None:
            item = self._items[loop] = self._factory()
        return item

    def peek(self) -> T | None:
        """The running loop's instance if one was made, without making one."""
        return self._items.get(asyncio.get_running_loop())
