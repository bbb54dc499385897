"""Write-side business logic for conversations (HackSoft style: keyword-only services).

Every user message is saved before any other work starts. Runs are launched only after
the transaction commits (``transaction.on_commit``), so a worker never sees a run whose
trigger message is not yet visible.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from agentsite.errors import ApplicationError
from conversations import rows
from conversations.models import Conversation, Message, Run
from conversations.watcher import notify_run_changed

logger = logging.getLogger(__name__)

TITLE_MAX_CHARS = 60
STALE_HEARTBEAT = timedelta(seconds=getattr(settings, "AGENTSITE_RUN_STALE_SECONDS", 90))
# A queued run waits for a worker; in-process it starts at once, on Celery it may queue.
QUEUED_TOO_LONG = {"embedded": timedelta(seconds=90), "celery": timedelta(minutes=15)}


def message_max_chars() -> int:
    return int(getattr(settings, "AGENTSITE_MESSAGE_MAX_CHARS", 100_000))


def conversation_create(*, owner, title: str = "", model=None) -> Conversation:
    if model is None:
        model = default_model_cached(user=owner)
    return Conversation.objects.create(owner=owner, title=title.strip()[:200], model=model)


def default_model_cached(*, user):
    """The model a new conversation (or a run of one that has none) uses for ``user``,
    cached while the configuration is unchanged."""
    from agentsite.configcache import cached
    from llms.selectors import default_model_for_user

    return cached(("default-model", user.pk), lambda: default_model_for_user(user=user))


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    title = title.strip()
    if not title:
        raise ApplicationError("A title cannot be empty.", extra={"title": ["Required."]})
    conversation.title = title[:200]
    conversation.save(update_fields=["title", "updated_at"])
    return conversation


def conversation_archive(*, conversation: Conversation, archived: bool = True) -> Conversation:
    conversation.archived = archived
    conversation.save(update_fields=["archived", "updated_at"])
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    for run in conversation.runs.filter(status__in=Run.ACTIVE_STATUSES):
        run_cancel(run=run)
    conversation.delete()


def conversation_set_model(
    *, conversation: Conversation, user, model_id: int | str
) -> Conversation:
    """Switch the conversation's model; refuses models this user may not use."""
    from llms.selectors import model_get_for_user

    conversation.model = model_get_for_user(user=user, model_id=model_id)
    conversation.save(update_fields=["model", "updated_at"])
    return conversation


def next_message_seq(
    conversation_id: int, *, title_if_untitled: str = "", events_through: int = 0
) -> tuple[int, str]:
    """Allocate the next per-conversation message number; locks the conversation's row
    until the transaction ends (PostgreSQL; SQLite's write transaction locks the file).

    One ``UPDATE ... RETURNING`` (PostgreSQL, SQLite 3.35+): the ORM's update cannot
    return the new value, and a second query for it ran on every message. The same
    statement titles a conversation that has no title yet with ``title_if_untitled`` (a
    new chat's first message: one query less) and raises the event numbers' high-water
    mark to ``events_through`` (a run reserving its done event's number as it closes).
    Returns the number and the current title.
    """
    meta = Conversation._meta
    updated_at = meta.get_field("updated_at").get_db_prep_value(timezone.now(), connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {meta.db_table} SET last_message_seq = last_message_seq + 1, "
            "updated_at = %s, title = CASE WHEN title = '' THEN %s ELSE title END, "
            "last_event_seq = CASE WHEN last_event_seq < %s THEN %s ELSE last_event_seq END "
            "WHERE id = %s RETURNING last_message_seq, title",
            [updated_at, title_if_untitled, events_through, events_through, conversation_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
    return row[0], row[1]


def message_create(
    *,
    conversation: Conversation,
    role: str,
    content: str,
    kind: str = Message.Kind.CHAT,
    run: Run | None = None,
    pinned: bool = False,
    reasoning: str = "",
    usage: dict[str, Any] | None = None,
    seq: int | None = None,
) -> Message:
    """Save a message under the next number; ``seq`` is one the caller's transaction has
    already allocated with :func:`next_message_seq`."""
    fields = {
        "role": role, "kind": kind, "content": content, "run": run, "pinned": pinned,
        "reasoning": reasoning, "usage": usage or {},
    }  # fmt: skip
    if seq is not None:
        return rows.insert(Message(conversation=conversation, seq=seq, **fields))
    # No savepoint inside a caller's transaction: nothing here is retried on its own.
    with transaction.atomic(savepoint=False):
        seq, _title = next_message_seq(conversation.pk)
        return rows.insert(Message(conversation=conversation, seq=seq, **fields))


def active_run(*, conversation: Conversation) -> Run | None:
    return conversation.runs.filter(status__in=Run.ACTIVE_STATUSES).order_by("-created_at").first()


def message_post(*, conversation: Conversation, user, content: str) -> tuple[Message, Run, bool]:
    """Save the user's message, then start a run or inject it into the active one.

    Returns ``(message, run, injected)``.
    """
    content = (content or "").strip()
    if not content:
        raise ApplicationError("Type a message first.", extra={"content": ["Required."]})
    limit = message_max_chars()
    if len(content) > limit:
        raise ApplicationError(
            f"The message is too long ({len(content):,} characters; the limit is {limit:,}).",
            code="too_large",
            extra={"content": [f"At most {limit} characters."]},
        )
    try:
        return _message_save(conversation=conversation, user=user, content=content)
    except _StaleActiveRun:
        # A dead run must not take the message: sweep it (outside the lock, it publishes),
        # then save the message again, starting a new run.
        run_sweep_stale(conversation=conversation)
        return _message_save(
            conversation=conversation, user=user, content=content, check_stale=False
        )


class _StaleActiveRun(Exception):
    """The conversation's active run stopped heart-beating (rolls the save back)."""


def _message_save(
    *, conversation: Conversation, user, content: str, check_stale: bool = True
) -> tuple[Message, Run, bool]:
    with transaction.atomic():
        # Allocating the message number locks the conversation first, so two posts
        # cannot both start a run: the second sees the first one's run.
        seq, conversation.title = next_message_seq(
            conversation.pk, title_if_untitled=_title_from(content)
        )
        # A conversation's first message: no run can exist yet (runs start from messages).
        current = active_run(conversation=conversation) if seq > 1 else None
        if current is not None and check_stale and _is_stale(current):
            raise _StaleActiveRun
        if current is not None:
            message = message_create(
                conversation=conversation,
                seq=seq,
                role=Message.Role.USER,
                content=content,
                kind=Message.Kind.INJECT,
                run=current,
                pinned=True,
            )
            transaction.on_commit(lambda: notify_run_changed(current.pk))
            return message, current, True
        message = message_create(
            conversation=conversation, seq=seq, role=Message.Role.USER, content=content
        )
        refusal = _quota_refusal(user)
        run = rows.insert(Run(conversation=conversation, trigger_message=message))
        message.run = run
        rows.update(Message, message.pk, run=run)
        if refusal:
            # The message stays saved; the run is recorded as refused so the user sees why.
            run.status = Run.Status.FAILED
            run.error = refusal
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "error", "finished_at"])
        else:
            transaction.on_commit(lambda: _launch(run.pk))
    return message, run, False


def _quota_refusal(user) -> str:
    """The quota's refusal message, or "" when the user may start a run."""
    from llms.services import quota_check

    try:
        quota_check(user=user)
    except ApplicationError as exc:
        return exc.message
    return ""


def _title_from(content: str) -> str:
    line = " ".join(content.split())
    return line if len(line) <= TITLE_MAX_CHARS else line[: TITLE_MAX_CHARS - 1] + "…"


def _launch(run_id: int) -> None:
    from conversations import launcher

    launcher.launch(run_id)


def followups_left_over(*, run_id: int, taken_in: list[int]) -> list[int]:
    """Follow-ups sent to ``run_id`` other than the ones its agent took in (``taken_in``):
    they came too late, or while the answer was being written."""
    return list(
        Message.objects.filter(run_id=run_id, kind=Message.Kind.INJECT)
        .exclude(pk__in=taken_in)
        .order_by("seq")
        .values_list("pk", flat=True)
    )


def run_create_followup(*, run: Run, message_ids: list[int]) -> tuple[Run, list[Message]] | None:
    """Make follow-ups ``run`` left over (:func:`followups_left_over`) the input of a new
    run: they become ordinary messages of the conversation, the last one its query.

    Call it in the transaction that closes ``run`` (a message posted next then joins the
    new run). Not launched here: the caller launches it once ``run``'s last events are
    out, so the page shows the new run before its first frame arrives.
    """
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
            conversation_id=run.conversation_id, trigger_message=pending[-1]
        )
        Message.objects.filter(pk__in=[m.pk for m in pending]).update(
            run=followup, kind=Message.Kind.CHAT
        )
    return followup, pending


def run_claim(*, run_id: int, task_id: str = "") -> Run | None:
    """Mark a queued run running and load what executing it reads; None if it was not
    queued any more or its Stop came first.

    Two plain statements (PostgreSQL, SQLite 3.35+): the claim's ``UPDATE ... RETURNING``
    and one join for the conversation and the trigger. The ORM's update plus its
    ``select_related().only().get()`` cost 1.7-2.5 ms of CPU per run here (query
    compilation, deferred-field bookkeeping), these 0.4-0.5 ms. The run comes back with
    its conversation (owner: id only) and trigger message attached, the other columns
    deferred; ``task_id``, the Celery task executing it, is recorded by the same update.
    """
    runs, conversations, messages = Run._meta, Conversation._meta, Message._meta
    stamp = runs.get_field("started_at").get_db_prep_value(timezone.now(), connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {runs.db_table} SET status = %s, started_at = %s, heartbeat_at = %s, "
            "task_id = CASE WHEN %s = '' THEN task_id ELSE %s END "
            "WHERE id = %s AND status = %s AND NOT cancel_requested "
            "RETURNING conversation_id, trigger_message_id",
            [
                Run.Status.RUNNING.value,
                stamp,
                stamp,
                task_id,
                task_id,
                run_id,
                Run.Status.QUEUED.value,
            ],
        )
        claimed = cursor.fetchone()
        if claimed is None:
            return None
        conversation_id, trigger_id = claimed
        cursor.execute(
            "SELECT c.owner_id, c.model_id, c.last_event_seq, c.last_message_seq, m.content, "
            f"m.seq FROM {conversations.db_table} c LEFT JOIN {messages.db_table} m "
            "ON m.id = %s WHERE c.id = %s",
            [trigger_id, conversation_id],
        )
        owner_id, model_id, last_event_seq, last_message_seq, content, seq = cursor.fetchone()
    conversation = rows.loaded(
        Conversation,
        id=conversation_id,
        owner_id=owner_id,
        model_id=model_id,
        last_event_seq=last_event_seq,
        last_message_seq=last_message_seq,
    )
    conversation.owner = rows.loaded(
        conversation._meta.get_field("owner").related_model, id=owner_id
    )
    run = rows.loaded(
        Run, id=run_id, conversation_id=conversation_id, trigger_message_id=trigger_id
    )
    run.conversation = conversation
    if trigger_id is not None:
        run.trigger_message = rows.loaded(Message, id=trigger_id, content=content, seq=seq)
    return run


def run_close(
    *, run_id: int, status: str, error: str, iterations: int, usage: dict, elapsed: float
) -> None:
    """Record how a run ended (one plain ``UPDATE``, :mod:`conversations.rows`)."""
    rows.update(
        Run, run_id, status=status, error=error, iterations=iterations, usage=usage,
        elapsed=elapsed, finished_at=timezone.now(),
    )  # fmt: skip


def run_cancel(*, run: Run) -> Run:
    """Ask a run to stop: immediately if queued, else by flag the worker polls."""
    from conversations import launcher

    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if not run.is_active:
            return run
        run.cancel_requested = True
        if run.status == Run.Status.QUEUED and not launcher.is_local(run.pk):
            run.status = Run.Status.CANCELLED
            run.finished_at = timezone.now()
        run.save(update_fields=["cancel_requested", "status", "finished_at"])
    if not launcher.cancel_local(run.pk):
        transaction.on_commit(lambda: notify_run_changed(run.pk))
    return run


def message_set_pinned(*, message: Message, pinned: bool) -> Message:
    message.pinned = pinned
    message.save(update_fields=["pinned"])
    return message


def _stale_cutoffs(now) -> tuple[Any, Any]:
    """(heartbeat, creation) times before which a running / queued run counts as dead."""
    return now - STALE_HEARTBEAT, now - QUEUED_TOO_LONG[settings.AGENTSITE_EXECUTION]


def _is_stale(run: Run) -> bool:
    """Whether :func:`run_sweep_stale` may have something to do with this active run."""
    heartbeat_cutoff, queued_cutoff = _stale_cutoffs(timezone.now())
    if run.status == Run.Status.RUNNING:
        return run.heartbeat_at is None or run.heartbeat_at < heartbeat_cutoff
    return run.created_at < queued_cutoff


def run_sweep_stale(*, conversation: Conversation | None = None) -> int:
    """Mark runs whose worker stopped heart-beating as failed ("interrupted").

    Never re-runs them: tools may have side effects. Returns the number swept.
    """
    from conversations import launcher
    from conversations.publisher import publish_interrupted

    now = timezone.now()
    heartbeat_cutoff, queued_cutoff = _stale_cutoffs(now)
    qs = Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=heartbeat_cutoff)
    never_started = Run.objects.filter(status=Run.Status.QUEUED, created_at__lt=queued_cutoff)
    if conversation is not None:
        qs = qs.filter(conversation=conversation)
        never_started = never_started.filter(conversation=conversation)
    for run in never_started:
        if not launcher.is_local(run.pk):
            Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED).update(
                status=Run.Status.FAILED,
                error="The run never started (was the server restarted?). "
                "Send the message again to retry.",
                finished_at=now,
            )
    swept = 0
    for run in qs:
        updated = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
            status=Run.Status.FAILED,
            error="The run was interrupted: its worker stopped responding. "
            "You can send the message again to retry.",
            finished_at=timezone.now(),
        )
        if updated:
            swept += 1
            publish_interrupted(run_id=run.pk)
    return swept
