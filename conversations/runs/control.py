"""How a Stop and a follow-up reach a running run.

The database holds the truth: a Stop sets ``Run.cancel_requested``, a follow-up is an
inject ``Message`` whose ``delivered_at`` is empty. After the commit, the sender sends
the run a wake-up that says what changed (``{"action": "cancel"}`` or ``{"action":
"followup", "message_id": ..., "content": ...}``): straight onto the run's own event loop
when this process executes it, else to the channel-layer group every process executing
runs joined (one subscription per event loop, not per run). The run applies it on its
loop. Each loop's heartbeat writes its runs' ``heartbeat_at`` and re-reads their rows, so
a lost wake-up is late, never lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from conversations.models import Message, Run, ToolApproval
from conversations.runs import loops
from conversations.runs.db import DATABASE_OUTAGES, db
from core import runtime
from engine import CancelToken

logger = logging.getLogger(__name__)

CONTROL_GROUP = "agentsite.run-control"

Deliver = Callable[[int, str], None]  # (message id, content) of a follow-up
RunState = tuple[bool, list[tuple[int, str]]]  # Stop requested; undelivered follow-ups


def heartbeat_interval() -> float:
    return settings.AGENTSITE_RUN_HEARTBEAT_SECONDS


# ---------------------------------------------------------------------- sender side


def send_cancel(run_id: int) -> None:
    """Tell the run a Stop was saved (call after the commit)."""
    _send(run_id, {"action": "cancel"})


def send_followup(run_id: int, message_id: int, content: str) -> None:
    """Hand the run a follow-up that was saved (call after the commit)."""
    _send(run_id, {"action": "followup", "message_id": message_id, "content": content})


def send_approval(run_id: int, call_id: str, status: str) -> None:
    """Tell the run the user decided on a tool call waiting for approval (after the commit)."""
    _send(run_id, {"action": "approval", "call_id": call_id, "status": status})


def _send(run_id: int, message: dict[str, Any]) -> None:
    control = _local_control(run_id)
    if control is not None and control.loop is not None:
        control.loop.call_soon_threadsafe(control.apply, message)
        return
    layer = get_channel_layer()
    if not reaches_other_processes(layer):
        return  # no run here and no way to another process: the heartbeat finds the row
    wake_up = {"type": "run.control", "run_id": run_id, **message}
    try:
        loops.call(layer.group_send, CONTROL_GROUP, wake_up)
    except Exception:  # the heartbeat still finds the row
        logger.warning("could not send the wake-up for run %s", run_id, exc_info=True)


def _local_control(run_id: int) -> RunControl | None:
    """The control of ``run_id`` if one of this process's loops executes it."""
    for each in runtime.every():
        loop_runs = each.find(LoopControl)
        control = loop_runs.runs.get(run_id) if loop_runs is not None else None
        if control is not None:
            return control
    return None


def reaches_other_processes(layer: Any) -> bool:
    """Whether the channel layer carries messages between processes (not the in-memory one)."""
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


# ------------------------------------------------------------------------- run side


class RunControl:
    """Applies one run's wake-ups on its loop.

    Follow-ups are marked delivered, then handed to ``deliver``, one at a time in the
    order they came (a wake-up and the heartbeat may both bring one: it goes once).
    """

    def __init__(
        self,
        run_id: int,
        *,
        token: CancelToken,
        deliver: Deliver,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        self.run_id = run_id
        self.token = token
        self._deliver = deliver
        self._on_restart = on_restart
        self.stop_requested = False  # a Stop (or the run ended elsewhere) was applied
        self.restarting = False  # stopped because its process is stopping (issue 44)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._followups: list[tuple[int, str]] = []
        self._delivering: asyncio.Task[None] | None = None
        self._delivered: set[int] = set()
        self._approvals: dict[str, asyncio.Future[str]] = {}  # call id -> the decision

    async def start(self) -> None:
        """Receive wake-ups from now on (before the run is claimed: none is missed)."""
        self.loop = asyncio.get_running_loop()
        await loop_control().add(self)

    async def stop(self) -> None:
        loop_control().remove(self)
        if self._delivering is not None:
            self._delivering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._delivering

    def apply(self, message: dict[str, Any]) -> None:
        """One wake-up, on the run's loop."""
        if message.get("action") == "cancel":
            self.stop_requested = True
            self.token.cancel()
        elif message.get("action") == "followup":
            self._queue_followups([(int(message["message_id"]), str(message["content"]))])
        elif message.get("action") == "approval":
            self.apply_decisions({str(message["call_id"]): str(message["status"])})

    def expect_approval(self, call_id: str) -> asyncio.Future[str]:
        """The future the decision on ``call_id`` will resolve (create it before the row
        is saved: a decision made at once is not missed)."""
        return self._approvals.setdefault(call_id, asyncio.get_running_loop().create_future())

    def forget_approval(self, call_id: str) -> None:
        self._approvals.pop(call_id, None)

    @property
    def waiting_approvals(self) -> list[str]:
        return [call_id for call_id, future in self._approvals.items() if not future.done()]

    def apply_decisions(self, decisions: dict[str, str]) -> None:
        """Decisions on calls waiting for approval, from a wake-up or the rows."""
        for call_id, status in decisions.items():
            future = self._approvals.get(call_id)
            if future is not None and not future.done():
                future.set_result(status)

    def apply_state(self, cancel: bool, pending: list[tuple[int, str]]) -> None:
        """Apply a Stop and undelivered follow-ups read from the rows (on the run's loop)."""
        if cancel:
            self.stop_requested = True
            self.token.cancel()
        self._queue_followups(pending)

    def stop_for_restart(self) -> None:
        """Stop the run because its process is stopping: ``on_restart`` first notes what
        was under way (a tool call cut now decides whether another worker may go on)."""
        if self.restarting:
            return
        self.restarting = True
        if self._on_restart is not None:
            self._on_restart()
        self.token.cancel()

    def _queue_followups(self, followups: list[tuple[int, str]]) -> None:
        fresh = [f for f in followups if f[0] not in self._delivered]
        if not fresh:
            return
        self._followups.extend(fresh)
        if self._delivering is None or self._delivering.done():
            self._delivering = asyncio.ensure_future(self._deliver_in_order())

    async def _deliver_in_order(self) -> None:
        while self._followups:
            message_id, content = self._followups.pop(0)
            if message_id in self._delivered:
                continue
            try:
                marked = await db(mark_followup_delivered)(self.run_id, message_id)
            except DATABASE_OUTAGES:  # the heartbeat brings it again
                continue
            except Exception:  # the heartbeat brings it again
                logger.warning("could not mark follow-up %s delivered", message_id, exc_info=True)
                continue
            if marked:
                self._delivered.add(message_id)
                self._deliver(message_id, content)


class LoopControl:
    """The runs executing on one event loop: one subscription to the wake-ups from other
    processes (team mode), one heartbeat for all of them. A part of the process's runtime:
    its tasks start with the loop's first run and end when the runtime closes."""

    def __init__(self) -> None:
        self.runs: dict[int, RunControl] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._subscribed: asyncio.Event | None = None
        # The runs executing on the loop, from their start until their end is written
        # (a run leaves ``runs`` before it writes its end).
        self.executing: set[int] = set()
        self._idle: asyncio.Event | None = None  # set while nothing executes
        self.restarting = False  # the process is stopping: runs starting now stop at once

    def begin(self, run_id: int) -> None:
        """A run starts executing on this loop."""
        self.executing.add(run_id)
        if self._idle is not None:
            self._idle.clear()

    def end(self, run_id: int) -> None:
        """The run's execution returned (its end written, or left to the sweep)."""
        self.executing.discard(run_id)
        if not self.executing and self._idle is not None:
            self._idle.set()

    async def wait_idle(self, timeout: float) -> bool:
        """Wait (at most ``timeout``) until no run executes here; whether none does."""
        if not self.executing:
            return True
        if self._idle is None:
            self._idle = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        return not self.executing

    def stop_for_restart(self) -> list[int]:
        """Stop every run of the loop, and any that starts from now on, because the
        process is stopping; the runs stopped."""
        self.restarting = True
        controls = list(self.runs.values())
        for control in controls:
            control.stop_for_restart()
        return [control.run_id for control in controls]

    async def add(self, control: RunControl) -> None:
        """Watch ``control``'s run; returns once wake-ups from other processes reach it."""
        self.runs[control.run_id] = control
        if self.restarting:  # started after the grace period ran out
            control.stop_for_restart()
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks.append(loop.create_task(self._beat()))
            layer = get_channel_layer()
            if reaches_other_processes(layer):
                self._subscribed = asyncio.Event()
                self._tasks.append(loop.create_task(self._receive(layer, self._subscribed)))
        if self._subscribed is not None:
            await self._subscribed.wait()

    def remove(self, control: RunControl) -> None:
        """Stop watching ``control``'s run (the subscription stays for the next run)."""
        if self.runs.get(control.run_id) is control:
            del self.runs[control.run_id]

    async def aclose(self) -> None:
        """End the heartbeat and the subscription (the process is stopping)."""
        tasks, self._tasks, self._subscribed = self._tasks, [], None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _receive(self, layer: Any, subscribed: asyncio.Event) -> None:
        channel = await layer.new_channel()
        try:
            await layer.group_add(CONTROL_GROUP, channel)
        finally:
            subscribed.set()  # or failed: the heartbeat still finds the rows
        try:
            while True:
                message = await layer.receive(channel)
                control = self.runs.get(message.get("run_id"))
                if control is not None:
                    control.apply(message)
        finally:
            with contextlib.suppress(Exception):
                await layer.group_discard(CONTROL_GROUP, channel)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(heartbeat_interval())
            ids = list(self.runs)
            if not ids:
                continue
            try:
                states = await db(beat_and_read)(ids)
            except DATABASE_OUTAGES:  # logged once per outage by the database threads
                continue
            except Exception:  # one hiccup must not end the heartbeat
                logger.warning("heartbeat of %d runs failed", len(ids), exc_info=True)
                continue
            for run_id, state in states.items():
                control = self.runs.get(run_id)
                if control is not None:
                    control.apply_state(*state)
            await self._read_decisions()

    async def _read_decisions(self) -> None:
        """The fallback for a lost approval wake-up (one query, only while a call waits)."""
        waiting = {
            run_id: control.waiting_approvals
            for run_id, control in self.runs.items()
            if control.waiting_approvals
        }
        if not waiting:
            return
        try:
            decided = await db(read_decisions)(list(waiting))
        except DATABASE_OUTAGES:
            return
        except Exception:
            logger.warning("reading approval decisions failed", exc_info=True)
            return
        for run_id, decisions in decided.items():
            control = self.runs.get(run_id)
            if control is not None:
                control.apply_decisions(decisions)


def loop_control() -> LoopControl:
    """The running loop's :class:`LoopControl` (a part of the process's runtime)."""
    return runtime.part(LoopControl)


# ------------------------------------------------------------------------- the rows


def beat_and_read(run_ids: list[int]) -> dict[int, RunState]:
    """Write the runs' heartbeat; what their rows say (a Stop, undelivered follow-ups).

    Queued runs too: a run this process took but could not claim yet (the database was
    away) is owned, and the sweep must not take it for one nobody started."""
    Run.objects.filter(pk__in=run_ids, status__in=Run.ACTIVE_STATUSES).update(
        heartbeat_at=timezone.now()
    )
    return read_runs_state(run_ids)


def read_runs_state(run_ids: list[int]) -> dict[int, RunState]:
    """For each run: whether it must stop (a Stop was requested, or it ended: a sweep
    reported it interrupted while its process could not reach the database), and its
    follow-ups not yet delivered (oldest first). A run still queued is not stopped: it
    listens from before its claim, and a beat may come first."""
    states: dict[int, RunState] = {run_id: (False, []) for run_id in run_ids}
    must_stop = Q(cancel_requested=True) | ~Q(status__in=Run.ACTIVE_STATUSES)
    for run_id in Run.objects.filter(must_stop, pk__in=run_ids).values_list("pk", flat=True):
        states[run_id] = (True, states[run_id][1])
    pending = (
        Message.objects.filter(run_id__in=run_ids, kind=Message.Kind.INJECT, delivered_at=None)
        .order_by("seq")
        .values_list("run_id", "pk", "content")
    )
    for run_id, message_id, content in pending:
        states[run_id][1].append((message_id, content))
    return states


def read_decisions(run_ids: list[int]) -> dict[int, dict[str, str]]:
    """The decided approvals of these runs: run id -> call id -> status."""
    decided: dict[int, dict[str, str]] = {}
    rows = (
        ToolApproval.objects.filter(run_id__in=run_ids)
        .exclude(status=ToolApproval.Status.PENDING)
        .values_list("run_id", "call_id", "status")
    )
    for run_id, call_id, status in rows:
        decided.setdefault(run_id, {})[call_id] = status
    return decided


def mark_followup_delivered(run_id: int, message_id: int) -> bool:
    """Mark the follow-up delivered to ``run_id``; False if it was already, or moved on."""
    return bool(
        Message.objects.filter(
            pk=message_id, run_id=run_id, kind=Message.Kind.INJECT, delivered_at__isnull=True
        ).update(delivered_at=timezone.now())
    )
