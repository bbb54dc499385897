"""How a Stop and a follow-up reach a running run.

The database holds the truth: a Stop sets ``Run.cancel_requested``, a follow-up is an
inject ``Message`` whose ``delivered_at`` is empty. After the commit, the sender sends
the run a wake-up that says what changed (``{"action": "cancel"}`` or ``{"action":
"followup", "message_id": ..., "content": ...}``): straight onto the run's own event loop
when this process executes it, else to the run's channel-layer group, which the process
executing it joined. The run applies it on its loop. Its heartbeat re-reads the rows, so
a lost wake-up is late, never lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.utils import timezone

from conversations.models import Message, Run
from engine import CancelToken

logger = logging.getLogger(__name__)

Deliver = Callable[[int, str], None]  # (message id, content) of a follow-up

_local: dict[int, RunControl] = {}
_local_lock = threading.Lock()


def control_group(run_id: int) -> str:
    return f"run-control.{run_id}"


def heartbeat_interval() -> float:
    return float(getattr(settings, "AGENTSITE_RUN_HEARTBEAT_SECONDS", 5.0))


# ---------------------------------------------------------------------- sender side


def send_cancel(run_id: int) -> None:
    """Tell the run a Stop was saved (call after the commit)."""
    _send(run_id, {"action": "cancel"})


def send_followup(run_id: int, message_id: int, content: str) -> None:
    """Hand the run a follow-up that was saved (call after the commit)."""
    _send(run_id, {"action": "followup", "message_id": message_id, "content": content})


def _send(run_id: int, message: dict[str, Any]) -> None:
    with _local_lock:
        control = _local.get(run_id)
    if control is not None:
        control.loop.call_soon_threadsafe(control.apply, message)
        return
    layer = get_channel_layer()
    if not _reaches_other_processes(layer):
        return  # no run here and no way to another process: the heartbeat finds the row
    try:
        async_to_sync(layer.group_send)(control_group(run_id), {"type": "run.control", **message})
    except Exception:  # the heartbeat still finds the row
        logger.warning("could not send the wake-up for run %s", run_id, exc_info=True)


def _reaches_other_processes(layer: Any) -> bool:
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


# ------------------------------------------------------------------------- run side


class RunControl:
    """Applies a run's wake-ups on its loop, writes its heartbeat, re-reads its rows.

    Follow-ups are marked delivered, then handed to ``deliver``, one at a time in the
    order they came (a wake-up and the heartbeat may both bring one: it goes once).
    """

    def __init__(self, run_id: int, *, token: CancelToken, deliver: Deliver) -> None:
        self.run_id = run_id
        self.token = token
        self._deliver = deliver
        self.loop: asyncio.AbstractEventLoop | None = None
        self._followups: asyncio.Queue[tuple[int, str]] = asyncio.Queue()
        self._delivered: set[int] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._layer: Any = None
        self._channel = ""

    async def start(self) -> None:
        """Receive wake-ups from now on (before the run is claimed: none is missed)."""
        self.loop = asyncio.get_running_loop()
        with _local_lock:
            _local[self.run_id] = self
        layer = get_channel_layer()
        if _reaches_other_processes(layer):
            self._layer = layer
            self._channel = await layer.new_channel()
            await layer.group_add(control_group(self.run_id), self._channel)
            self._tasks.append(self.loop.create_task(self._receive()))
        self._tasks.append(self.loop.create_task(self._deliver_in_order()))

    def start_heartbeat(self) -> None:
        """Beat and re-read the rows every interval (once the run is claimed)."""
        assert self.loop is not None, "start() first"
        self._tasks.append(self.loop.create_task(self._beat()))

    async def stop(self) -> None:
        with _local_lock:
            if _local.get(self.run_id) is self:
                del _local[self.run_id]
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._layer is not None:
            with contextlib.suppress(Exception):
                await self._layer.group_discard(control_group(self.run_id), self._channel)

    def apply(self, message: dict[str, Any]) -> None:
        """One wake-up, on the run's loop."""
        if message.get("action") == "cancel":
            self.token.cancel()
        elif message.get("action") == "followup":
            self._followups.put_nowait((int(message["message_id"]), str(message["content"])))

    async def check_rows(self, *, beat: bool = False) -> None:
        """Apply what the rows say: a Stop, follow-ups not yet delivered."""
        cancel, pending = await database_sync_to_async(read_run_state, thread_sensitive=False)(
            self.run_id, beat=beat
        )
        if cancel:
            self.token.cancel()
        for message_id, content in pending:
            self._followups.put_nowait((message_id, content))

    async def _receive(self) -> None:
        while True:
            message = await self._layer.receive(self._channel)
            if message.get("type") == "run.control":
                self.apply(message)

    async def _deliver_in_order(self) -> None:
        while True:
            message_id, content = await self._followups.get()
            if message_id in self._delivered:
                continue
            try:
                marked = await database_sync_to_async(
                    mark_followup_delivered, thread_sensitive=False
                )(self.run_id, message_id)
            except Exception:  # the heartbeat brings it again
                logger.warning("could not mark follow-up %s delivered", message_id, exc_info=True)
                continue
            if marked:
                self._delivered.add(message_id)
                self._deliver(message_id, content)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(heartbeat_interval())
            try:
                await self.check_rows(beat=True)
            except Exception:  # one database hiccup must not end the heartbeat
                logger.warning("heartbeat of run %s failed", self.run_id, exc_info=True)


def read_run_state(run_id: int, *, beat: bool = False) -> tuple[bool, list[tuple[int, str]]]:
    """Whether a Stop was requested, and the follow-ups not yet delivered (oldest first);
    with ``beat``, the run's heartbeat is written first."""
    if beat:
        Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(heartbeat_at=timezone.now())
    cancel = Run.objects.filter(pk=run_id, cancel_requested=True).exists()
    pending = list(
        Message.objects.filter(run_id=run_id, kind=Message.Kind.INJECT, delivered_at__isnull=True)
        .order_by("seq")
        .values_list("pk", "content")
    )
    return cancel, pending


def mark_followup_delivered(run_id: int, message_id: int) -> bool:
    """Mark the follow-up delivered to ``run_id``; False if it was already, or moved on."""
    return bool(
        Message.objects.filter(
            pk=message_id, run_id=run_id, kind=Message.Kind.INJECT, delivered_at__isnull=True
        ).update(delivered_at=timezone.now())
    )
