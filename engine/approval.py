"""Tool calls that wait for the user's approval (DESIGN.md section 4, ``approval`` events).

A tool says which of its calls need approval (``Tool.requires_confirmation`` for all of
them, ``Tool.confirm_if`` per call). The loop then asks its :data:`Approver` (the web
layer: an Approve / Deny card, an API endpoint) before running the call, and the time
spent waiting is not the tool's. A call that is not approved is not run: the agent sees
why, as the call's observation, and carries on.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
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
    """What the user is asked to approve: the call, why it needs approval, and what it
    would send (``request``: the tool's :meth:`~engine.tools.Tool.call_preview`, e.g.
    the method, the resolved URL, the body and the names of the credentials; empty when
    the tool cannot say)."""

    call_id: str
    tool_name: str
    tool_args: dict[str, Any] = field(hash=False)
    reason: str
    request: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def binding(self) -> str:
        """What a decision on this request is bound to (:func:`call_binding`)."""
        return call_binding(self.tool_name, self.tool_args)


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


def call_binding(tool_name: str, tool_args: Mapping[str, Any]) -> str:
    """The SHA-256 of a call's tool name and canonical JSON arguments (hex).

    A decision is stored with the binding of the call it was asked about, and a call takes
    only a decision with its own binding: approving one call never approves another tool,
    or the same tool with other arguments. Numbers count by value (``1``, ``1.0``), so the
    binding survives a database's JSON (PostgreSQL's jsonb gives ``1e16`` back as
    ``10000000000000000``).
    """
    canonical = json.dumps(
        [tool_name, _canonical(tool_args)], ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _canonical(value: Any) -> list[Any]:
    """``value`` as a tree tagged by JSON type: unambiguous (a number never reads as a
    string, nor an object as a tagged value), object keys sorted, numbers by value."""
    if value is None or isinstance(value, bool | str):
        return ["v", value]
    if isinstance(value, int | float):
        return ["n", _number(value)]
    if isinstance(value, Mapping):
        entries = [[str(key), _canonical(item)] for key, item in value.items()]
        return ["o", sorted(entries, key=lambda entry: entry[0])]
    if isinstance(value, list | tuple):
        return ["a", [_canonical(item) for item in value]]
    return ["?", repr(value)]


def _number(value: float) -> str:
    """A number as digits and an exponent, trailing zeros moved into the exponent: exact
    (no rounding, however many digits) and the same for every way of writing it."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    sign, digits, exponent = (
        Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    ).as_tuple()
    while len(digits) > 1 and digits[-1] == 0:
        digits, exponent = digits[:-1], int(exponent) + 1
    if digits == (0,):
        return "0"
    return f"{'-' if sign else ''}{''.join(map(str, digits))}e{exponent}"


# Returns one of DECISIONS; may wait as long as it likes (it enforces its own timeout).
Approver = Callable[[ApprovalRequest], Awaitable[str]]


def refusal(decision: str | None) -> str:
    """The observation of a call that was not approved (``None``: nobody to ask)."""
    return REFUSALS.get(decision, REFUSALS[DENIED])
