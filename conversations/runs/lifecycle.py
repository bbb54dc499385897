"""A run's state changes as its executor makes them: claimed, closed with or without an
answer, its left-over follow-ups handed to the next run; and the sweep of runs whose
process died. Sync functions (the executor calls them on a database thread)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.db.models.functions import Coalesce
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from conversations.history.numbering import (
    last_event_seq_of,
    next_message_seq,
    reserve_event_numbers,
)
from conversations.models import Conversation, Message, Run
from conversations.preferences import run_language
from conversations.runs.approvals import approvals_expire_open
from conversations.runs.db import DATABASE_OUTAGES
from conversations.runs.publisher import (
    Entry,
    Unanswered,
    logged_progress,
    publish_interrupted,
    write_events,
)
from conversations.runs.wording import duration_words
from conversations.selectors import run_inject_ids
from core.outages import is_disk_full
from engine import Usage
from llms.pricing import UNPRICED, price_now
from llms.services import usage_record

logger = logging.getLogger(__name__)

# In embedded mode this one process executes every run: a run active since before it
# started has no owner (its process died), and is reported at once.
PROCESS_STARTED = timezone.now()

# In English (gettext_noop): each is translated where it becomes a run's error.
INTERRUPTED = gettext_noop(
    "The run was interrupted: the process writing it stopped responding (a restart or a "
    "crash). What it had written is kept; press Retry to answer again."
)
RESTARTED_BEFORE_START = gettext_noop(
    "The answer never started: the server restarted before it began. "
    "Your message is saved; press Retry."
)
COULD_NOT_START = gettext_noop(
    "The run could not start because of an internal error. Send the message again."
)
DATABASE_DOWN_AT_START = gettext_noop(
    "The answer could not start: the database was not answering. "
    "Your message is saved; press Retry in a moment."
)
DISK_FULL_AT_START = gettext_noop(
    "The answer could not start: the server's disk is full. Your message is saved; "
    "press Retry once an administrator has freed space."
)
NO_RUN_LOOP = gettext_noop(
    "The answer could not be started: this process (a command or script, not the server) "
    "executes no runs. Your message is saved; press Retry in the chat."
)
QUEUE_UNREACHABLE = gettext_noop(
    "The answer could not be started: the task queue is not answering. "
    "Your message is saved; press Retry in a moment."
)


def never_taken() -> str:
    """Why a queued run no worker took within the stale period failed."""
    if settings.AGENTSITE_EXECUTION == "embedded":
        return _(RESTARTED_BEFORE_START)
    waited = duration_words(stale_heartbeat().total_seconds())
    return _(
        "The answer never started: no worker took it within %(waited)s (the workers are "
        "stopped or all busy). Your message is saved; press Retry."
    ) % {"waited": waited}


def never_taken_over() -> str:
    """Why a run handed back by a stopping worker (runs/handover.py) and taken by no other
    within the stale period failed."""
    waited = duration_words(stale_heartbeat().total_seconds())
    return _(
        "The worker writing this answer restarted and no other worker took it over within "
        "%(waited)s. Your message is saved; press Retry."
    ) % {"waited": waited}


def start_failure(error: BaseException) -> str:
    """What the user is told when a run's start failed with ``error``."""
    if is_disk_full(error):
        return _(DISK_FULL_AT_START)
    if isinstance(error, DATABASE_OUTAGES):
        return _(DATABASE_DOWN_AT_START)
    return _(COULD_NOT_START)


class RunSwept(Exception):
    """The run was reported interrupted (its heartbeat stopped, e.g. while its process
    could not reach the database) before it could close: its late result is dropped, as
    the report told the user the run had ended."""


# Every column the executor reads (a column left out is one more query per run).
CLAIMED_FIELDS = (
    "conversation_id",
    "parent_id",
    "resumes_parent",
    "trigger_message_id",
    "model_id",
    "mode",
    "conversation__owner_id",
    "conversation__model_id",
    "conversation__mode",
    "conversation__last_message_seq",
    "conversation__owner__id",
    "trigger_message__content",
    "trigger_message__seq",
)


def run_claim(*, run_id: int, task_id: str = "") -> Run | None:
    """Mark a queued run running; the run with its conversation, trigger message,
    ``last_event_seq`` and the event numbers reserved for it (``reserved_event_numbers``),
    or None if it was not queued any more or its Stop came first."""
    now = timezone.now()
    fields: dict[str, Any] = {"status": Run.Status.RUNNING, "started_at": now, "heartbeat_at": now}
    if task_id:
        fields["task_id"] = task_id
    # All or nothing: a claim whose reads failed (the database went away meanwhile) leaves
    # the run queued for the next try, not running with nobody executing it.
    with transaction.atomic():
        claimed = Run.objects.filter(
            pk=run_id, status=Run.Status.QUEUED, cancel_requested=False
        ).update(**fields)
        if not claimed:
            return None
        # With the highest event number of the conversation, which its first event
        # follows. Only the columns a run reads: every column of four tables is converted
        # row by row.
        run = (
            Run.objects.select_related("conversation__owner", "trigger_message")
            .only(*CLAIMED_FIELDS)
            .annotate(
                last_event_seq=last_event_seq_of("conversation"),
                # Handed back by a stopped worker, to go on from its own trace
                # (runs/handover.py); the trace itself is read only then.
                handed_over=ExpressionWrapper(
                    Q(resume_trace__isnull=False), output_field=BooleanField()
                ),
            )
            .get(pk=run_id)
        )
        run.reserved_event_numbers = reserve_event_numbers(run.conversation_id)
    return run


def run_close_with_answer(
    *,
    run: Run,
    model: Any,
    answer: str,
    outcome: dict[str, Any],
    events: list[Entry],
    taken_in: list[int],
) -> tuple[Message, Run | None]:
    """Save the answer, close the run and write its last ``events``, in one transaction.

    Returns the answer and the run answering left-over follow-ups (not launched), if any.
    """
    with transaction.atomic():
        seq = next_message_seq(run.conversation_id)
        write_events([(run.conversation_id, events)])
        message = Message.objects.create(
            conversation_id=run.conversation_id,
            seq=seq,
            role=Message.Role.ASSISTANT,
            content=answer,
            run=run,
            usage=outcome.get("usage") or {},
            incomplete=outcome.get("status") == Run.Status.INCOMPLETE,
        )
        # Numbered right after the run's question: nobody wrote meanwhile, no follow-ups.
        trigger_seq = run.trigger_message.seq if run.trigger_message_id else 0
        check = seq != trigger_seq + 1
        followup = _close(run=run, model=model, taken_in=taken_in, followups=check, **outcome)
    return message, followup


def run_close_unanswered(
    *,
    run: Run,
    model: Any,
    taken_in: list[int],
    partial_answer: str = "",
    events: Sequence[Entry] = (),
    **outcome: Any,
) -> Run | None:
    """Close a run that ended without a complete answer and write its last ``events``
    (the report of how it ended), in one transaction, keeping the ``partial_answer`` it
    streamed, if any, as an incomplete answer; returns the run answering left-over
    follow-ups, if any."""
    with transaction.atomic():
        if events:
            write_events([(run.conversation_id, list(events))])
        if partial_answer.strip():
            # Numbering the message takes the conversation's row lock (see _close).
            partial_answer_save(run=run, content=partial_answer)
        else:
            # The conversation's row lock, as a message post takes it (see _close).
            Conversation.objects.filter(pk=run.conversation_id).update(updated_at=timezone.now())
        return _close(run=run, model=model, taken_in=taken_in, **outcome)


def partial_answer_save(*, run: Run, content: str) -> Message:
    """The text of an answer that was cut short, as the user saw it, marked incomplete."""
    return Message.objects.create(
        conversation_id=run.conversation_id,
        seq=next_message_seq(run.conversation_id),
        role=Message.Role.ASSISTANT,
        content=content,
        run=run,
        incomplete=True,
    )


def _close(
    *,
    run: Run,
    model: Any,
    taken_in: list[int],
    status: str,
    error: str = "",
    error_detail: str = "",
    iterations: int = 0,
    usage: dict[str, Any] | None = None,
    elapsed: float = 0.0,
    followups: bool = True,
) -> Run | None:
    """Mark the run finished; its follow-ups other than ``taken_in`` become a new run.

    Those came too late, or while the answer was being written: no model call of this run
    saw them. Called holding the conversation's row lock, as a message post does: a
    follow-up posted meanwhile either committed before the query below, or sees this run
    closed and starts its own.
    """
    # The model's prices as the run ends: the run's cost and its day's usage agree.
    price = price_now(model=model) if usage else UNPRICED
    cost = price.cost(Usage.from_dict(usage)) if usage else None
    updated = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
        status=status,
        error=error if status != Run.Status.SUCCEEDED else "",
        error_detail=error_detail,
        iterations=iterations,
        usage={**(usage or {}), **(cost.as_usage() if cost is not None else {})},
        elapsed=elapsed,
        finished_at=timezone.now(),
    )
    if not updated:  # rolls back the answer and events saved with the close
        raise RunSwept(run.pk)
    approvals_expire_open(run_id=run.pk)
    if usage and model is not None:
        # The model the run was built with (the conversation may have switched since).
        usage_record(user=run.conversation.owner, model=model, usage=usage, price=price)
    if status == Run.Status.CANCELLED:
        # A Stop stops what was queued for the run too.
        followups_cancel(run_id=run.pk, taken_in=taken_in)
        return None
    if not followups:
        return None
    left_over = (
        Message.objects.filter(run_id=run.pk, kind=Message.Kind.INJECT)
        .exclude(pk__in=taken_in)
        .order_by("seq")
    )
    return run_create_followup(run=run, message_ids=[m.pk for m in left_over])


def followups_cancel(*, run_id: int, taken_in: list[int] | tuple[int, ...] = ()) -> None:
    """The run's follow-ups its model never took in stay as what the user typed (ordinary
    messages, not pinned), unanswered: the user stopped the run they were queued for."""
    Message.objects.filter(run_id=run_id, kind=Message.Kind.INJECT).exclude(pk__in=taken_in).update(
        kind=Message.Kind.CHAT, pinned=False, delivered_at=None
    )


def followups_unanswered(*, run_id: int) -> Unanswered | None:
    """The event that shows the follow-ups a Stop left unanswered (see
    :func:`followups_cancel`) as the ordinary messages a page load shows, or None.

    They are the stopped run's user messages numbered after its question: the questions
    of a run answering follow-ups are numbered up to its question, and follow-ups it took
    in stay inject messages.
    """
    question = Run.objects.filter(pk=run_id).values_list("trigger_message__seq", flat=True)
    question_seq = question.first() or 0
    rows = (
        Message.objects.filter(
            run_id=run_id, role=Message.Role.USER, kind=Message.Kind.CHAT, seq__gt=question_seq
        )
        .order_by("seq")
        .values_list("pk", "content", "pinned")
    )
    messages = [{"id": pk, "content": content, "pinned": pinned} for pk, content, pinned in rows]
    return Unanswered(messages) if messages else None


def run_create_followup(*, run: Run, message_ids: list[int]) -> Run | None:
    """Make follow-ups ``run`` left over the input of a new run: they become ordinary
    messages of the conversation, the last one its question. Not launched here."""
    if not message_ids:
        return None
    with transaction.atomic(savepoint=False):
        pending = list(
            Message.objects.select_for_update()
            .filter(pk__in=message_ids, run_id=run.pk, kind=Message.Kind.INJECT)
            .order_by("seq")
        )
        if not pending:
            return None
        followup = Run.objects.create(
            conversation_id=run.conversation_id,
            trigger_message=pending[-1],
            parent=run,  # it continues the branch of the run they were sent to
            model_id=run.model_id,
        )
        Message.objects.filter(pk__in=[m.pk for m in pending]).update(
            run=followup, kind=Message.Kind.CHAT
        )
    return followup


def run_fail_unstarted(run_id: int, reason: str = COULD_NOT_START) -> None:
    """A run whose start failed: failed with ``reason``, its waiting follow-ups released
    and reported, never left queued or running. ``reason``: one of this module's
    sentences (translated here) or a sentence already translated."""
    reason = _(reason)
    updated = Run.objects.filter(pk=run_id, status__in=Run.ACTIVE_STATUSES).update(
        status=Run.Status.FAILED, error=reason, finished_at=timezone.now()
    )
    if updated:
        _report_ended(run_id=run_id)


# ---------------------------------------------------------------------------- sweep


def database_check() -> None:
    """Raise if the database does not answer (the sweeper's judgement depends on it)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def stale_heartbeat() -> timedelta:
    return timedelta(seconds=settings.AGENTSITE_RUN_STALE_SECONDS)


def ownerless_before() -> datetime:
    """An active run whose last sign of life (its heartbeat, or its creation while no
    process has taken it) is older than this has no live owner."""
    stale = timezone.now() - stale_heartbeat()
    if settings.AGENTSITE_EXECUTION == "embedded":
        return max(stale, PROCESS_STARTED)
    return stale


def run_is_stale(run: Run) -> bool:
    """Whether :func:`run_sweep_stale` may have something to do with this active run."""
    return (run.heartbeat_at or run.created_at) < ownerless_before()


def run_sweep_stale(
    *, conversation: Conversation | None = None, before: datetime | None = None
) -> int:
    """Fail active runs without a live owner: running runs whose process stopped
    heart-beating ("interrupted"), queued runs no process took (or whose process died
    waiting to start them); never re-run them (tools may have side effects). Each is
    reported on its conversation's event stream, its waiting follow-ups released as plain
    messages. ``before``: the cut-off (default :func:`ownerless_before`). Returns the
    number of runs swept."""
    cutoff = before or ownerless_before()
    stale = Run.objects.alias(last_sign=Coalesce("heartbeat_at", "created_at")).filter(
        status__in=Run.ACTIVE_STATUSES, last_sign__lt=cutoff
    )
    if conversation is not None:
        stale = stale.filter(conversation=conversation)
    swept = 0
    # A queued run with a trace of its own was handed back by a stopping worker.
    handed = ExpressionWrapper(Q(resume_trace__isnull=False), output_field=BooleanField())
    for run_id, status, handed_back in stale.values_list("pk", "status", handed):
        with translation.override(run_language(run_id)):  # the run's own words' language
            if status == Run.Status.RUNNING:
                reason = _(INTERRUPTED)
            else:
                reason = never_taken_over() if handed_back else never_taken()
        updated = Run.objects.filter(pk=run_id, status=status).update(
            status=Run.Status.FAILED, error=reason, finished_at=timezone.now()
        )
        if updated:
            swept += 1
            _report_ended(run_id=run_id)
    return swept


def _report_ended(*, run_id: int) -> None:
    """Report a run no process executes any more as failed: keep the answer text that
    reached its log (incomplete), turn the follow-ups it never took in into ordinary
    messages, close its open tool cards, then publish it all. A client that sees the
    report finds all of that stored."""
    progress = logged_progress(run_id)
    with transaction.atomic():
        if progress.answer_text.strip():
            run = Run.objects.only("pk", "conversation_id").get(pk=run_id)
            partial_answer_save(run=run, content=progress.answer_text)
        taken_in = run_inject_ids(run_id)[: progress.injects_taken]
        followups_cancel(run_id=run_id, taken_in=taken_in)
        approvals_expire_open(run_id=run_id)
    unanswered = followups_unanswered(run_id=run_id)
    publish_interrupted(run_id=run_id, progress=progress, after=[unanswered] if unanswered else [])
