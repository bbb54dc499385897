"""The runs of an event loop whose process is stopping (SIGTERM, issue 44).

The runs get until ``finish_by`` to finish; the ones still going are then stopped for the
restart (:meth:`conversations.runs.control.LoopControl.stop_for_restart`) and each ends or
is handed back (:mod:`conversations.runs.handover`), which they get until ``end_by`` to
write. A run whose end is still not written then is left to the stale-run sweep, as after
a crash: its heartbeat stops with the process.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from conversations.runs.control import loop_control

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Drained:
    """How the loop's runs ended: ``finished`` ran to their end within the grace period,
    ``stopped`` were stopped for the restart, ``left`` had not written their end by
    ``end_by`` (the sweep reports them)."""

    finished: int
    stopped: int
    left: int
    seconds: float


async def drain(*, finish_by: float, end_by: float) -> Drained:
    """Let the running loop's runs finish until ``finish_by``, then stop the rest and wait
    until ``end_by`` for their ends (both ``time.monotonic()``); from the loop."""
    control = loop_control()
    started = time.monotonic()
    running = len(control.executing)
    idle = await control.wait_idle(max(0.0, finish_by - time.monotonic()))
    stopped: list[int] = []
    if not idle:
        stopped = control.stop_for_restart()
        logger.info("stopping %d runs for the restart: %s", len(stopped), stopped)
        await control.wait_idle(max(0.0, end_by - time.monotonic()))
    else:
        control.restarting = True  # a run starting from now on stops at once
    left = len(control.executing)
    if left:
        logger.warning("%d runs had not ended when the grace period ran out", left)
    drained = Drained(running - len(stopped), len(stopped), left, time.monotonic() - started)
    if running:
        logger.info(
            "runs at the stop: %d finished, %d stopped for the restart, %d left (%.1f s)",
            drained.finished,
            drained.stopped,
            drained.left,
            drained.seconds,
        )
    return drained
