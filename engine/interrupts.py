"""Follow-up messages the user sends while a run is working.

The queue is filled from any thread (a wake-up applied on the run's loop, a heartbeat
reading durable rows) and drained by the agent loop at the mode-specific points described
in DESIGN.md.
"""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable

__all__ = ["InterruptQueue", "InterruptSource"]


@runtime_checkable
class InterruptSource(Protocol):
    def put(self, text: str) -> None: ...

    def drain(self) -> list[str]: ...


class InterruptQueue:
    """Thread-safe in-memory FIFO of pending follow-ups."""

    def __init__(self) -> None:
        self._items: list[str] = []
        self._lock = threading.Lock()

    def put(self, text: str) -> None:
        with self._lock:
            self._items.append(text)

    def drain(self) -> list[str]:
        with self._lock:
            items, self._items = self._items, []
        return items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
