"""Tool calls that wait for the user's approval (DESIGN.md section 4, ``approval`` events).

A tool says which of its calls need approval (``Tool.requires_confirmation`` for all of
them, ``Tool.confirm_if`` per call). The loop then asks its :data:`Approver` (the web
layer: an Approve / Deny card, an API endpoint) before running the call, and the time
spent waiting is not the tool's. A call that is not approved is not run: the agent sees
why, as the call's observation, and carries on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

APPROVED = "approved"
DENIED = "denied"
EXPIRED = "expired"
DECISIONS = (APPROVED, DENIED, EXPIRED)

ALWAYS_REASON = "An administrator marked this tool as needing your approval for every call."
REFUSALS = {
    DENIED: "The user denied this call; it was not run. Do not call it again for this "
    "request: go on without it, or say what you would need.",
    EXPIRED: "The user did not answer the approval request in time; the call was not run.",
    None: "This tool needs the user's approval for this call, which cannot be asked here; "
    "it was not run.",
}


@dataclass(frozen=True)
class ApprovalRequest:
    """What the user is asked to approve: the call, and why it needs approval."""

    call_id: str
    tool_name: str
    tool_args: dict[str, Any] = field(hash=False)
    reason: str


# Returns one of DECISIONS; may wait as long as it likes (it enforces its own timeout).
Approver = Callable[[ApprovalRequest], Awaitable[str]]


def refusal(decision: str | None) -> str:
    """The observation of a call that was not approved (``None``: nobody to ask)."""
    return REFUSALS.get(decision, REFUSALS[DENIED])
