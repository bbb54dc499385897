"""Tool calls that wait for the user's approval (DESIGN.md section 4, ``approval`` events).

A tool says which of its calls need approval (``Tool.requires_confirmation`` for all of
them, ``Tool.confirm_if`` per call). The loop then asks its :data:`Approver` (the web
layer: an Approve / Deny card, an API endpoint) before running the call, and the time
spent waiting is not the tool's. A call that is not approved is not run: the agent sees
why, as the call's observation, and carries on.
"""

from __future__ import annotations

import itertools
import secrets
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


class ApprovalIds:
    """Ids for approval requests, made by the loop: a model chooses its calls' ids and
    may use one again (a prompt injection can make it), so a decision is bound to one
    request, never to a call id. Unique per agent (a random prefix; the steps of a plan
    are agents of their own) and per request (a counter)."""

    def __init__(self) -> None:
        self.prefix = secrets.token_hex(6)
        self.counter = itertools.count(1)

    def next(self) -> str:
        return f"approval-{self.prefix}-{next(self.counter)}"


# Returns one of DECISIONS; may wait as long as it likes (it enforces its own timeout).
Approver = Callable[[ApprovalRequest], Awaitable[str]]


def refusal(decision: str | None) -> str:
    """The observation of a call that was not approved (``None``: nobody to ask)."""
    return REFUSALS.get(decision, REFUSALS[DENIED])
