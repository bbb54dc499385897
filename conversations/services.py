"""Write-side business logic for conversations (HackSoft style: keyword-only services).

Every user message is saved before any other work starts. Runs are launched only after
the transaction commits (``transaction.on_commit``), so a worker never sees a run whose
trigger message is not yet visible.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.services import Client, record
from conversations.attachments import attach, attachments_clean
from conversations.history.numbering import next_message_seq
from conversations.history.tree import RunTree
from conversations.models import AgentMode, Conversation, Message, Run, RunEvent, ToolApproval
from conversations.runs import control, launcher, lifecycle
from conversations.runs.publisher import publish_events_sync
from core.configcache import cached
from core.errors import ApplicationError
from engine.approval import call_binding
from engine.events import AgentEvent, ErrorEvent
from files import services as files_services
from files.models import StoredFile
from knowledge import selectors as knowledge_selectors
from llms.selectors import default_model_for_user, model_get_for_user
from llms.services import quota_check

logger = logging.getLogger(__name__)

TITLE_MAX_CHARS = 60


def message_max_chars() -> int:
    return int(settings.AGENTSITE_MESSAGE_MAX_CHARS)


def message_content_clean(content: str | None) -> str:
    """The message as it will be saved; refused when empty or over the length limit."""
    content = (content or "").strip()
    if not content:
        raise ApplicationError(_("Type a message first."), extra={"content": [_("Required.")]})
    limit = message_max_chars()
    if len(content) > limit:
        raise ApplicationError(
            _("The message is too long (%(count)s characters; the limit is %(limit)s).")
            % {"count": f"{len(content):,}", "limit": f"{limit:,}"},
            code="too_large",
            extra={"content": [_("At most %(limit)s characters.") % {"limit": limit}]},
        )
    return content


def conversation_create(
    *, owner, title: str = "", model=None, mode: str = AgentMode.REACT
) -> Conversation:
    """A new conversation; a title given here is the user's (no automatic one replaces it)."""
    if model is None:
        model = cached(("default-model", owner.pk), lambda: default_model_for_user(user=owner))
    title = title.strip()[:200]
    return Conversation.objects.create(
        owner=owner, title=title, title_by_user=bool(title), model=model, mode=mode_clean(mode)
    )


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    """The user's title: from now on no automatic title replaces it (conversations/titles.py)."""
    title = title.strip()
    if not title:
        raise ApplicationError(_("A title cannot be empty."), extra={"title": [_("Required.")]})
    conversation.title = title[:200]
    conversation.title_by_user = True
    conversation.save(update_fields=["title", "title_by_user", "updated_at"])
    return conversation


def mode_clean(mode: str | None, *, blank: bool = False) -> str:
    """A mode from user input; refused (400) when not one of ReAct, Plan, Auto."""
    mode = (mode or "").strip().lower()
    if blank and not mode:
        return ""
    if mode not in AgentMode.values:
        choices = ", ".join(AgentMode.values)
        raise ApplicationError(
            _("Unknown mode %(mode)s: choose one of %(choices)s.")
            % {"mode": repr(mode), "choices": choices},
            extra={"mode": [choices]},
        )
    return mode


def conversation_set_mode(*, conversation: Conversation, mode: str) -> Conversation:
    """How the conversation's next runs work (a running one keeps its mode)."""
    conversation.mode = mode_clean(mode)
    conversation.save(update_fields=["mode", "updated_at"])
    return conversation


def conversation_archive(*, conversation: Conversation, archived: bool = True) -> Conversation:
    conversation.archived = archived
    conversation.save(update_fields=["archived", "updated_at"])
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    """Delete the conversation, and the files attached to its messages that nothing else
    holds (another conversation's message, later a knowledge base)."""
    for run in conversation.runs.filter(status__in=Run.ACTIVE_STATUSES):
        run_cancel(run=run)
    with transaction.atomic():
        attached = list(StoredFile.objects.filter(messages__conversation=conversation).distinct())
        conversation.delete()
        files_services.delete_unattached(attached)


def conversation_set_knowledge(
    *, conversation: Conversation, user, base_ids: Sequence[int]
) -> Conversation:
    """Attach exactly these knowledge bases (the user's or shared with them) to the
    conversation; an id the user may not read is refused, naming it, and nothing changes."""
    wanted = list(dict.fromkeys(base_ids))
    readable = {b.pk: b for b in knowledge_selectors.readable_bases(user).filter(pk__in=wanted)}
    missing = [base_id for base_id in wanted if base_id not in readable]
    if missing:
        message = _("No knowledge base %(id)s that you may read.") % {"id": missing[0]}
        raise ApplicationError(message, extra={"knowledge": [message]})
    conversation.knowledge.set([readable[base_id] for base_id in wanted])
    return conversation


def conversation_set_model(
    *, conversation: Conversation, user, model_id: int | str
) -> Conversation:
    """Switch the conversation's model; refuses models this user may not use."""
    conversation.model = model_get_for_user(user=user, model_id=model_id)
    conversation.save(update_fields=["model", "updated_at"])
    return conversation


def message_create(
    *,
    conversation: Conversation,
    role: str,
    content: str,
    kind: str = Message.Kind.CHAT,
    run: Run | None = None,
    pinned: bool = False,
) -> Message:
    """Save a message under the conversation's next number."""
    with transaction.atomic():
        seq = next_message_seq(conversation.pk)
        return Message.objects.create(
            conversation=conversation, seq=seq, role=role, content=content, kind=kind,
            run=run, pinned=pinned,
        )  # fmt: skip


def active_run(*, conversation: Conversation) -> Run | None:
    return conversation.runs.filter(status__in=Run.ACTIVE_STATUSES).order_by("-created_at").first()


def message_post(
    *,
    conversation: Conversation,
    user,
    content: str,
    mode: str = "",
    file_ids: Sequence[Any] | None = None,
) -> tuple[Message, Run, bool]:
    """Save the user's message (with the user's files ``file_ids``), then start a run or
    hand it to the active one.

    ``mode`` (blank: the conversation's) is how a new run works; a follow-up joins the
    active run as it works. Returns ``(message, run, injected)``.
    """
    content = message_content_clean(content)
    mode = mode_clean(mode, blank=True)
    files = []
    if file_ids:
        model = conversation.model or default_model_for_user(user=user)
        files = attachments_clean(user=user, file_ids=file_ids, model=model)
    try:
        return _message_save(
            conversation=conversation, user=user, content=content, mode=mode, files=files
        )
    except _StaleActiveRun:
        # A dead run must not take the message: sweep it (outside the lock, it publishes),
        # then save the message again, starting a new run.
        lifecycle.run_sweep_stale(conversation=conversation)
        return _message_save(
            conversation=conversation,
            user=user,
            content=content,
            mode=mode,
            files=files,
            check_stale=False,
        )


class _StaleActiveRun(Exception):
    """The conversation's active run stopped heart-beating (rolls the save back)."""


def _message_save(
    *,
    conversation: Conversation,
    user,
    content: str,
    mode: str,
    files: Sequence[StoredFile] = (),
    check_stale: bool = True,
) -> tuple[Message, Run, bool]:
    with transaction.atomic():
        # Numbering the message locks the conversation first, so two posts cannot both
        # start a run: the second sees the first one's run.
        seq = next_message_seq(conversation.pk)
        current = active_run(conversation=conversation) if seq > 1 else None
        if current is not None and check_stale and lifecycle.run_is_stale(current):
            raise _StaleActiveRun
        if current is not None and files:
            raise ApplicationError(
                _(
                    "Files go with a new question: send them once this answer ends (or press "
                    "Stop), or send the text alone now as a follow-up."
                ),
                code="conflict",
                extra={"files": [_("The agent is still answering the previous message.")]},
            )
        if current is not None:
            message = Message.objects.create(
                conversation=conversation,
                seq=seq,
                role=Message.Role.USER,
                content=content,
                kind=Message.Kind.INJECT,
                run=current,
                pinned=True,
            )
            transaction.on_commit(
                lambda: control.send_followup(current.pk, message.pk, message.content)
            )
            return message, current, True
        message = Message.objects.create(
            conversation=conversation, seq=seq, role=Message.Role.USER, content=content
        )
        attach(message, files)
        # The question continues the branch the user is on.
        tip = RunTree.load(conversation.pk).tip() if seq > 1 else None
        if seq == 1:  # the first message titles a conversation that has no title yet
            title = _title_from(content)
            if Conversation.objects.filter(pk=conversation.pk, title="").update(title=title):
                conversation.title = title
            else:  # titled meanwhile: show that title
                conversation.refresh_from_db(fields=["title"])
        run = run_start(
            conversation=conversation,
            user=user,
            question=message,
            parent_id=tip.run_id if tip is not None else None,
            mode=mode,
        )
    return message, run, False


def run_start(
    *,
    conversation: Conversation,
    user,
    question: Message,
    parent_id: int | None,
    model=None,
    mode: str = "",
) -> Run:
    """A run answering ``question`` after the run ``parent_id``, launched once the
    transaction commits; when the user's quota refuses it, it is saved failed, saying why
    (the question stays saved). Called inside the caller's transaction."""
    refusal = quota_refusal(user)
    run = Run.objects.create(
        conversation=conversation, trigger_message=question, parent_id=parent_id, model=model,
        mode=mode,
    )  # fmt: skip
    if question.run_id is None:  # its first answer: the question is saved under it
        Message.objects.filter(pk=question.pk).update(run=run)
        question.run = run
    if refusal:
        run.status = Run.Status.FAILED
        run.error = refusal
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "error", "finished_at"])
    else:
        transaction.on_commit(lambda: _launch(run))
    return run


def _launch(run: Run) -> None:
    """Start the run; when it could not be queued it failed saying why, and ``run`` (which
    the response renders) shows that."""
    if not launcher.launch(run.pk):
        run.refresh_from_db(fields=["status", "error", "finished_at"])


def quota_refusal(user) -> str:
    """The quota's refusal message, or "" when the user may start a run."""
    try:
        quota_check(user=user)
    except ApplicationError as exc:
        return exc.message
    return ""


def _title_from(content: str) -> str:
    line = " ".join(content.split())
    return line if len(line) <= TITLE_MAX_CHARS else line[: TITLE_MAX_CHARS - 1] + "…"


def run_cancel(*, run: Run) -> Run:
    """Stop a run: at once if it is still queued, else through its process (the flag
    stays in the row for the heartbeat to find)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if not run.is_active:
            return run
        run.cancel_requested = True
        queued = run.status == Run.Status.QUEUED
        if queued:  # its claim will refuse it
            run.status = Run.Status.CANCELLED
            run.finished_at = timezone.now()
            lifecycle.followups_cancel(run_id=run.pk)
        run.save(update_fields=["cancel_requested", "status", "finished_at"])
        run_id = run.pk
        if queued:
            transaction.on_commit(lambda: _report_stopped(run_id))
        else:
            transaction.on_commit(lambda: control.send_cancel(run_id))
    return run


def _report_stopped(run_id: int) -> None:
    """The "Stopped." event of a run stopped before it started (unless it is gone), and
    the follow-ups it leaves unanswered."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        return
    events: list[AgentEvent] = [ErrorEvent(_("Stopped."), "cancelled")]
    unanswered = lifecycle.followups_unanswered(run_id=run_id)
    if unanswered is not None:
        events.append(unanswered)
    publish_events_sync(run=run, events=events)


def approval_decide(
    *, run: Run, call_id: str, user, approve: bool, client: Client | None = None
) -> ToolApproval:
    """The user's decision on a tool call of ``run`` waiting for approval; the run hears
    of it at once (a wake-up after the commit) or at its next heartbeat."""
    requested = (
        RunEvent.objects.filter(
            run=run, channel="approval", payload__status="requested", payload__call_id=call_id
        )
        .values_list("payload", flat=True)
        .first()
    )
    if requested is None:
        raise ApplicationError(_("There is no such approval request."), code="not_found")
    if run.status not in Run.ACTIVE_STATUSES:
        raise ApplicationError(_("This run has ended: the request is closed."), code="conflict")
    status = ToolApproval.Status.APPROVED if approve else ToolApproval.Status.DENIED
    now = timezone.now()
    with transaction.atomic():
        # The run may not have saved its row yet (the card shows as its event is sent).
        approval, created = ToolApproval.objects.get_or_create(
            run=run,
            call_id=call_id,
            defaults={
                "tool_name": requested.get("tool_name", ""),
                "tool_args": requested.get("tool_args") or {},
                # Bound to the call the card showed: only that call takes this decision.
                "binding": call_binding(
                    requested.get("tool_name", ""), requested.get("tool_args") or {}
                ),
                "reason": requested.get("reason", ""),
                "status": status,
                "decided_by": user,
                "decided_at": now,
            },
        )
        decided = created and approval.status == status
        if not created:
            decided = bool(
                ToolApproval.objects.filter(
                    pk=approval.pk, status=ToolApproval.Status.PENDING
                ).update(status=status, decided_by=user, decided_at=now)
            )
        if not decided:
            approval.refresh_from_db(fields=["status"])
            raise ApplicationError(
                _("This request was already answered (%(status)s).")
                % {"status": approval.get_status_display().lower()},
                code="conflict",
            )
        approval.status = status
        # Audited with the tool's name only: its arguments may hold what the user typed.
        record(
            "approval.approved" if approve else "approval.denied",
            actor=user,
            target=approval,
            target_label=f"{approval.tool_name} (run {run.pk}, call {call_id})",
            changes={"status": [ToolApproval.Status.PENDING.value, status.value]},
            client=client,
        )
        transaction.on_commit(lambda: control.send_approval(run.pk, call_id, status))
    return approval


def message_set_pinned(*, message: Message, pinned: bool) -> Message:
    message.pinned = pinned
    message.save(update_fields=["pinned"])
    return message
