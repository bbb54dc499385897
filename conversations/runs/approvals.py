"""Tool calls waiting for the user's approval, on the run's side (engine.approval).

The run saves the request as a :class:`~conversations.models.ToolApproval` row and waits
on its :class:`~conversations.runs.control.RunControl` for the decision, which the
decision service saves and sends as a wake-up (the heartbeat re-reads the rows if a
wake-up is lost). No answer within ``AGENTSITE_APPROVAL_TIMEOUT_SECONDS`` counts as a
refusal; so does the end of the run.
"""

from __future__ import annotations

import asyncio

from django.conf import settings
from django.utils import timezone

from conversations.models import ToolApproval
from conversations.runs.control import RunControl
from conversations.runs.db import db
from engine.approval import ApprovalRequest

DEFAULT_TIMEOUT_SECONDS = 300.0


def approval_timeout() -> float:
    return float(getattr(settings, "AGENTSITE_APPROVAL_TIMEOUT_SECONDS", DEFAULT_TIMEOUT_SECONDS))


class RunApprover:
    """The run's :data:`engine.approval.Approver`."""

    def __init__(self, run_id: int, control: RunControl) -> None:
        self.run_id = run_id
        self.control = control

    async def __call__(self, request: ApprovalRequest) -> str:
        decision = self.control.expect_approval(request.call_id)
        try:
            status = await db(approval_open)(run_id=self.run_id, request=request)
            if status != ToolApproval.Status.PENDING:  # decided before the row was saved
                return status
            try:
                return await asyncio.wait_for(decision, approval_timeout())
            except TimeoutError:
                return await db(approval_expire)(run_id=self.run_id, call_id=request.call_id)
        finally:
            self.control.forget_approval(request.call_id)


def approval_open(*, run_id: int, request: ApprovalRequest) -> str:
    """Save the request (or find the decision the user already made); its status."""
    row, _created = ToolApproval.objects.get_or_create(
        run_id=run_id,
        call_id=request.call_id,
        defaults={
            "tool_name": request.tool_name,
            "tool_args": request.tool_args,
            "reason": request.reason,
        },
    )
    return row.status


def approval_expire(*, run_id: int, call_id: str) -> str:
    """Expire the request unless the user decided meanwhile; the final status."""
    ToolApproval.objects.filter(
        run_id=run_id, call_id=call_id, status=ToolApproval.Status.PENDING
    ).update(status=ToolApproval.Status.EXPIRED, decided_at=timezone.now())
    return ToolApproval.objects.values_list("status", flat=True).get(run_id=run_id, call_id=call_id)


def approvals_expire_open(*, run_id: int) -> None:
    """The run ended: nothing waits for its open requests any more."""
    ToolApproval.objects.filter(run_id=run_id, status=ToolApproval.Status.PENDING).update(
        status=ToolApproval.Status.EXPIRED, decided_at=timezone.now()
    )
