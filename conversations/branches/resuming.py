"""Continue a paused run: a loop guard stopped it "so the user can step in"; the user
does, with an optional note, and a new run goes on from where it stopped.

The new run is the paused run's child in the tree of runs (its continuation), its
question is the note (saved as a user message before anything else, like every message),
and it goes on from the paused run's trace (:mod:`conversations.history.traces`).
"""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from conversations.branches.branching import lock, refuse_over_quota, refuse_while_busy
from conversations.history.traces import mark_resuming
from conversations.models import AgentMode, Message, Run
from conversations.services import message_create, message_max_chars, run_start
from core.errors import ApplicationError

# What the model reads after the trace when the user pressed Continue without a note.
CONTINUE_REQUEST = "Please continue."

NOT_PAUSED = gettext_noop("Only a paused run can be continued; this one %(status)s.")
PLAN_MODE = gettext_noop(
    "This run was paused in plan mode, which keeps no step-by-step trace to go on from. "
    "Ask again instead."
)
NO_TRACE = gettext_noop("This run kept no trace to go on from. Ask again instead.")
# Whole sentences (translated at refusal time), by the run's status.
_NOT_PAUSED_BY_STATUS = {
    Run.Status.QUEUED: gettext_noop(
        "Only a paused run can be continued; this one has not started yet."
    ),
    Run.Status.RUNNING: gettext_noop(
        "Only a paused run can be continued; this one is still running."
    ),
    Run.Status.SUCCEEDED: gettext_noop(
        "Only a paused run can be continued; this one has answered."
    ),
    Run.Status.FAILED: gettext_noop(
        "Only a paused run can be continued; this one failed (Retry it instead)."
    ),
    Run.Status.CANCELLED: gettext_noop(
        "Only a paused run can be continued; this one was stopped (Retry it instead)."
    ),
    Run.Status.INCOMPLETE: gettext_noop(
        "Only a paused run can be continued; this one was cut short (Retry it instead)."
    ),
}

__all__ = ["CONTINUE_REQUEST", "note_clean", "resume_refusal", "run_resume"]


def note_clean(content: str | None) -> str:
    """The note as saved: the user's text, or :data:`CONTINUE_REQUEST` when there is
    none; refused (400) when over the message length limit."""
    note = (content or "").strip()
    limit = message_max_chars()
    if len(note) > limit:
        raise ApplicationError(
            _("The note is too long (%(length)s characters; the limit is %(limit)s).")
            % {"length": f"{len(note):,}", "limit": f"{limit:,}"},
            extra={"content": [_("At most %(limit)d characters.") % {"limit": limit}]},
        )
    return note or CONTINUE_REQUEST


def resume_refusal(run: Run, *, has_trace: bool) -> str:
    """Why ``run`` cannot be continued ("" when it can)."""
    if run.status != Run.Status.PAUSED:
        sentence = _NOT_PAUSED_BY_STATUS.get(run.status)
        if sentence is not None:
            return _(sentence)
        return _(NOT_PAUSED) % {"status": run.status}
    if not has_trace:
        mode = run.mode or run.conversation.mode
        return _(PLAN_MODE) if mode != AgentMode.REACT else _(NO_TRACE)
    return ""


def run_resume(*, run: Run, user, content: str | None = None) -> Run:
    """Go on from paused ``run``: the note (``content``; none: a request to continue) is
    saved as a user message, and a new ReAct run, ``run``'s child, answers it after
    ``run``'s trace. Refused (409) when ``run`` is not paused or cannot be resumed, or
    while a run of the conversation is active; 429 over the quota."""
    note = note_clean(content)
    with transaction.atomic():
        lock(run.conversation_id)
        run = Run.objects.select_related("conversation").defer("resume_trace").get(pk=run.pk)
        has_trace = Run.objects.filter(pk=run.pk, resume_trace__isnull=False).exists()
        refusal = resume_refusal(run, has_trace=has_trace)
        if refusal:
            raise ApplicationError(refusal, code="conflict")
        refuse_while_busy(run.conversation)
        refuse_over_quota(user)
        conversation = run.conversation
        message = message_create(conversation=conversation, role=Message.Role.USER, content=note)
        resumed = run_start(
            conversation=conversation,
            user=user,
            question=message,
            parent_id=run.pk,
            model=run.model,
            mode=AgentMode.REACT,  # it goes on as the ReAct loop it was
        )
        mark_resuming(resumed)
    return resumed
