"""How often a stream's text frames go out: at once while the process has spare CPU, less
often as it gets busy.

Every frame costs the process the same work however much text it carries (render, channel
layer, websocket write), so when streams outgrow the CPU, sending each delta at once
queues frames behind each other and every reader falls behind. Instead each run's
publisher waits ``interval()`` between frames and sends what arrived meanwhile as one
frame: the interval doubles while the process is busy and halves back to zero once it is
not, up to :data:`MAX_FRAME_INTERVAL`. Readers see the same text, in order, in fewer and
larger pieces.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from core import runtime

__all__ = ["MAX_FRAME_INTERVAL", "FramePacer", "pacer"]

MAX_FRAME_INTERVAL = 0.25  # seconds: text still reads as flowing at four frames a second
SAMPLE_SECONDS = 0.2  # how often the process's CPU use is sampled
# The process's CPU use, in cores, above which frames slow down and below which they speed
# up again: the event loop is one thread, and one core is all it can use.
BUSY_CORES = 0.8
IDLE_CORES = 0.5
FIRST_STEP = 0.01  # seconds: the interval's first step up from zero


class FramePacer:
    """The frame interval of every run on one event loop (a part of the process's runtime:
    ``pacer()``)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.process_time,
    ) -> None:
        self.clock = clock
        self.cpu_clock = cpu_clock
        self._interval = 0.0
        self._sampled_at = clock()
        self._cpu_at = cpu_clock()

    def interval(self) -> float:
        """Seconds between two frames of one run now (sampling the CPU when due)."""
        now = self.clock()
        elapsed = now - self._sampled_at
        if elapsed >= SAMPLE_SECONDS:
            cpu = self.cpu_clock()
            self.adjust((cpu - self._cpu_at) / elapsed)
            self._sampled_at, self._cpu_at = now, cpu
        return self._interval

    def adjust(self, cores: float) -> None:
        """Slow frames down (``cores`` busy) or speed them up (idle)."""
        if cores > BUSY_CORES:
            self._interval = min(MAX_FRAME_INTERVAL, max(FIRST_STEP, self._interval * 2))
        elif cores < IDLE_CORES:
            halved = self._interval / 2
            self._interval = halved if halved >= FIRST_STEP else 0.0


def pacer() -> FramePacer:
    """The running loop's frame pacer."""
    return runtime.part(FramePacer)
