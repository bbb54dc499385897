"""Tool calls waiting for the user's approval, on the run's side (engine.approval).

The run saves the request as a :class:`~conversations.models.ToolApproval` row and waits
on its :class:`~conversations.runs.control.RunControl` for the decision, which the
decision service saves and sends as a wake-up (the heartbeat re-reads the rows if a
wake-up is lost). No answer within ``AGENTSITE_APPROVAL_TIMEOUT_SECONDS`` counts as a
refusal; so does the end of the run.

A decision is the user's answer to one request, never to a call id (the model chooses
those and may use one again): a call takes a decision only from its request's own row,
bound to its tool and arguments (``ToolApproval.binding``), and only once. A request
whose id this run asked about before, or whose row is bound to another call, is refused
without running: it never runs on another call's decision.
"""

from __future__ import annotations

import asyncio
import logging

from django.conf import settings
from django.utils import timezone

from conversations.models import ToolApproval
from conversations.runs.control import RunControl
from conversations.runs.db import db
from core.metrics import APPROVALS_WAITING
from engine.approval import ApprovalRequest

logger = logging.getLogger(__name__)

# What a call gets when the decision it meets is not its own (never run on it).
NOT_ITS_OWN = ToolApproval.Status.DENIED


def approval_timeout() -> float:
    return float(settings.AGENTSITE_APPROVAL_TIMEOUT_SECONDS)


class RunApprover:
    """The run's :data:`engine.approval.Approver` (one per run: it remembers the ids the
    run asked about)."""

    def __init__(self, run_id: int, control: RunControl) -> None:
        self.run_id = run_id
        self.control = control
        self.asked: set[str] = set()

    async def __call__(self, request: ApprovalRequest) -> str:
        if request.call_id in self.asked:
            logger.warning("run %s: approval id %s asked about again; refused",
                           self.run_id, request.call_id)  # fmt: skip
            return NOT_ITS_OWN
        self.asked.add(request.call_id)
        decision = self.control.expect_approval(request.call_id)
        try:
            status = await db(approval_open)(run_id=self.run_id, request=request)
            if status != ToolApproval.Status.PENDING:  # decided before the row was saved
                return status
            APPROVALS_WAITING.inc()
            try:
                await asyncio.wait_for(decision, approval_timeout())
            except TimeoutError:
                await db(approval_expire)(run_id=self.run_id, call_id=request.call_id)
            finally:
                APPROVALS_WAITING.dec()
            # The row is the truth, whatever the wake-up said.
            return await db(approval_taken)(run_id=self.run_id, request=request)
        finally:
            self.control.forget_approval(request.call_id)


def approval_open(*, run_id: int, request: ApprovalRequest) -> str:
    """Save the request (or find the decision the user already made on it); its status,
    or :data:`NOT_ITS_OWN` when the id's row is bound to another call."""
    row, created = ToolApproval.objects.get_or_create(
        run_id=run_id,
        call_id=request.call_id,
        defaults={
            "tool_name": request.tool_name,
            "tool_args": request.tool_args,
            "binding": request.binding,
            "reason": request.reason,
        },
    )
    return row.status if created else _own_status(row.status, row.binding, request)


def approval_taken(*, run_id: int, request: ApprovalRequest) -> str:
    """The decision on ``request`` as its row holds it, if the row is bound to it."""
    status, binding = ToolApproval.objects.values_list("status", "binding").get(
        run_id=run_id, call_id=request.call_id
    )
    return _own_status(status, binding, request)


def _own_status(status: str, binding: str, request: ApprovalRequest) -> str:
    if binding == request.binding:
        return status
    logger.warning("approval %s is bound to another call; not run", request.call_id)
    return NOT_ITS_OWN


def approval_expire(*, run_id: int, call_id: str) -> None:
    """Expire the request unless the user decided meanwhile."""
    ToolApproval.objects.filter(
        run_id=run_id, call_id=call_id, status=ToolApproval.Status.PENDING
    ).update(status=ToolApproval.Status.EXPIRED, decided_at=timezone.now())


def approvals_expire_open(*, run_id: int) -> None:
    """The run ended: nothing waits for its open requests any more."""
    ToolApproval.objects.filter(run_id=run_id, status=ToolApproval.Status.PENDING).update(
        status=ToolApproval.Status.EXPIRED, decided_at=timezone.now()
    )
