"""One poller per process for every run it executes: heartbeat, Stop, follow-ups.

Stop and follow-ups are durable rows that any process may write (DESIGN.md section 3). A
poll per run costs three queries four times a second; with hundreds of runs in one worker
that alone saturated a core. Here one thread polls for all local runs with two queries per
tick (plus one heartbeat update every few seconds) and hands results to each run's loop.

It polls when woken, not on a tight timer: saving a follow-up or a Stop calls
:func:`notify_run_changed`, which wakes this process's poller directly (the run is local)
or through the channel layer's wake group (the run is in another process). The rows stay
the truth: a lost wake-up is caught by the slow fallback tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db import connections
from django.utils import timezone

from agentsite import serverloop
from conversations import launcher
from conversations.asyncdb import checked_connections
from conversations.models import Message, Run
from engine import CancelToken

logger = logging.getLogger(__name__)

WAKE_DEBOUNCE = 0.01  # a burst of wake-ups becomes one tick
HEARTBEAT_INTERVAL = 5.0
IDLE_POLLS_BEFORE_EXIT = 30  # the thread ends after this many fallback intervals without runs
WAKE_GROUP = "agentsite.run-wake"

Deliver = Callable[[int, str], None]


@dataclass
class _Watched:
    loop: asyncio.AbstractEventLoop
    token: CancelToken
    deliver: Deliver


class RunPoller:
    def __init__(self) -> None:
        self._runs: dict[int, _Watched] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._last_beat = 0.0
        self._last_full_check = 0.0
        self._woken = threading.Event()
        self._due: set[int] = set()  # runs a wake-up asked to check at the next tick
        # Per loop: the wake-up listener's task, and the event set once it is subscribed.
        self._listeners: dict[asyncio.AbstractEventLoop, tuple[asyncio.Task, asyncio.Event]] = {}

    async def watch(self, run_id: int, token: CancelToken, deliver: Deliver) -> None:
        """Poll for ``run_id`` until :meth:`forget`; ``deliver`` runs on the caller's loop.

        Returns once wake-ups sent from other processes reach this loop too. What was
        saved before is not checked here: the caller wakes the run if its claim saw a
        follow-up (most runs have none, and a check cost a poll of two queries each).
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            self._runs[run_id] = _Watched(loop, token, deliver)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="agentsite-run-poller", daemon=True
                )
                self._thread.start()
            if not _wakes_cross_processes():
                return
            listener = self._listeners.get(loop)
            if listener is None or listener[0].done():
                subscribed = asyncio.Event()
                listener = (loop.create_task(self._listen(subscribed)), subscribed)
                self._listeners[loop] = listener
        await listener[1].wait()

    def is_watching(self, run_id: int) -> bool:
        with self._lock:
            return run_id in self._runs

    def forget(self, run_id: int) -> None:
        """Stop polling for ``run_id`` (called on its loop).

        The last run of a loop also stops that loop's listener, so no task outlives the
        loop (test loops close), except on the process's run loop (a Celery worker's),
        which lives as long as the process: there the subscription stays for the next run
        instead of costing every run a subscribe round trip before it may start.
        """
        with self._lock:
            watched = self._runs.pop(run_id, None)
            if watched is None or any(w.loop is watched.loop for w in self._runs.values()):
                return
            if launcher.is_process_run_loop(watched.loop):
                return
            listener = self._listeners.pop(watched.loop, None)
        if listener is not None:
            listener[0].cancel()

    def wake(self, run_id: int) -> None:
        """Check ``run_id`` now: a follow-up or a Stop for it was saved (or, seen at its
        claim, while it was queued).

        A woken tick checks only the runs woken since the last one: a burst of run starts
        in a busy worker checked every watched run once per start (quadratic). The
        fallback tick still checks them all.
        """
        with self._lock:
            self._due.add(run_id)
        self._woken.set()

    async def _listen(self, subscribed: asyncio.Event) -> None:
        """Wake-ups sent by other processes (team mode) through the channel layer (only
        started where :func:`_wakes_cross_processes`: a layer exists)."""
        layer = get_channel_layer()
        try:
            channel = await layer.new_channel()
            await layer.group_add(WAKE_GROUP, channel)
        finally:
            subscribed.set()  # or failed: the fallback tick still finds the rows
        try:
            while True:
                message = await layer.receive(channel)
                run_id = message.get("run_id")
                if run_id in self._runs:
                    self.wake(run_id)
        finally:
            with contextlib.suppress(Exception):
                await layer.group_discard(WAKE_GROUP, channel)

    def is_running(self) -> bool:
        """Whether the polling thread is alive (it ends a while after the last run)."""
        with self._lock:
            return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        """The polling thread. It hands its database connections back when it ends: with
        PostgreSQL's pool, a connection a finished thread still held never came back, and
        after ``DB_POOL_SIZE`` quiet spells every query of the process waited and failed.
        """
        try:
            self._poll()
        finally:
            connections.close_all()  # this thread's own

    def _poll(self) -> None:
        idle_since: float | None = None
        while True:
            woken = self._woken.wait(fallback_interval())
            if woken:
                time.sleep(WAKE_DEBOUNCE)
            self._woken.clear()
            with self._lock:
                watched = dict(self._runs)
                due, self._due = self._due, set()
                if not watched:
                    # Linger: the next run reuses this thread and its connection instead
                    # of starting (and connecting) anew after every short pause.
                    idle_since = idle_since or time.monotonic()
                    linger = IDLE_POLLS_BEFORE_EXIT * fallback_interval()
                    if time.monotonic() - idle_since >= linger:
                        self._thread = None
                        return
                    continue
                idle_since = None
            # Every run is checked at least once per fallback interval, woken or not.
            full = not woken or time.monotonic() - self._last_full_check >= fallback_interval()
            if full:
                self._last_full_check = time.monotonic()
            checks = watched if full else {r: watched[r] for r in due if r in watched}
            try:
                checked_connections(self._tick, watched, checks)
            except Exception:  # a DB hiccup must not stop the polling
                logger.exception("run poller tick failed")

    def _tick(self, watched: dict[int, _Watched], checks: dict[int, _Watched]) -> None:
        """Heart-beat every watched run when due; look for Stops and follow-ups of ``checks``."""
        now = timezone.now()
        if time.monotonic() - self._last_beat >= HEARTBEAT_INTERVAL:
            Run.objects.filter(pk__in=list(watched)).update(heartbeat_at=now)
            self._last_beat = time.monotonic()
        if not checks:
            return
        ids = list(checks)
        for run_id in Run.objects.filter(pk__in=ids, cancel_requested=True).values_list(
            "pk", flat=True
        ):
            watched[run_id].token.cancel()
        # No transaction: only this poller delivers these runs' follow-ups, and on SQLite
        # an empty check would otherwise take the write lock on every tick.
        pending = list(
            Message.objects.filter(
                run_id__in=ids, kind=Message.Kind.INJECT, delivered_at__isnull=True
            )
            .order_by("seq")
            .values_list("pk", "run_id", "content")
        )
        if pending:
            Message.objects.filter(pk__in=[pk for pk, _r, _c in pending]).update(delivered_at=now)
        for message_id, run_id, content in pending:
            entry = watched[run_id]
            entry.loop.call_soon_threadsafe(entry.deliver, message_id, content)


def _wakes_cross_processes() -> bool:
    """Whether other processes can send wake-ups: not through an in-memory layer, which
    reaches only this process (where :func:`notify_run_changed` wakes the poller itself)."""
    layer = get_channel_layer()
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


def fallback_interval() -> float:
    """Seconds between polls without a wake-up (only lost wake-ups wait this long)."""
    return float(getattr(settings, "AGENTSITE_RUN_POLL_SECONDS", 2.0))


poller = RunPoller()


def notify_run_changed(run_id: int) -> None:
    """Wake the poller of the process executing ``run_id`` (call after the commit)."""
    if poller.is_watching(run_id):
        poller.wake(run_id)
        return
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        serverloop.call(layer.group_send, WAKE_GROUP, {"type": "run.wake", "run_id": run_id})
    except Exception:  # the fallback tick still finds the row
        logger.warning("could not send the wake-up for run %s", run_id, exc_info=True)
