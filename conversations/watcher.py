"""One poller per process for every run it executes: heartbeat, Stop, follow-ups.

Stop and follow-ups are durable rows that any process may write (DESIGN.md section 3). A
poll per run costs three queries four times a second; with hundreds of runs in one worker
that alone saturated a core. Here one thread polls for all local runs with two queries per
tick (plus one heartbeat update every few seconds) and hands results to each run's loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import close_old_connections, transaction
from django.utils import timezone

from conversations.models import Message, Run
from engine import CancelToken

logger = logging.getLogger(__name__)

WATCH_INTERVAL = 0.25
HEARTBEAT_INTERVAL = 5.0

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

    def watch(self, run_id: int, token: CancelToken, deliver: Deliver) -> None:
        """Poll for ``run_id`` until :meth:`forget`; ``deliver`` runs on the caller's loop."""
        with self._lock:
            self._runs[run_id] = _Watched(asyncio.get_running_loop(), token, deliver)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="agentsite-run-poller", daemon=True
                )
                self._thread.start()

    def forget(self, run_id: int) -> None:
        with self._lock:
            self._runs.pop(run_id, None)

    def _run(self) -> None:
        while True:
            time.sleep(WATCH_INTERVAL)
            with self._lock:
                watched = dict(self._runs)
                if not watched:
                    self._thread = None
                    return
            try:
                self._tick(watched)
            except Exception:  # a DB hiccup must not stop the polling
                logger.exception("run poller tick failed")
            finally:
                close_old_connections()

    def _tick(self, watched: dict[int, _Watched]) -> None:
        ids = list(watched)
        now = timezone.now()
        if time.monotonic() - self._last_beat >= HEARTBEAT_INTERVAL:
            Run.objects.filter(pk__in=ids).update(heartbeat_at=now)
            self._last_beat = time.monotonic()
        for run_id in Run.objects.filter(pk__in=ids, cancel_requested=True).values_list(
            "pk", flat=True
        ):
            watched[run_id].token.cancel()
        with transaction.atomic():
            pending = list(
                Message.objects.filter(
                    run_id__in=ids, kind=Message.Kind.INJECT, delivered_at__isnull=True
                )
                .order_by("seq")
                .values_list("pk", "run_id", "content")
            )
            if pending:
                Message.objects.filter(pk__in=[pk for pk, _r, _c in pending]).update(
                    delivered_at=now
                )
        for message_id, run_id, content in pending:
            entry = watched[run_id]
            entry.loop.call_soon_threadsafe(entry.deliver, message_id, content)


poller = RunPoller()
