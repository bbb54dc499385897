"""Edit, regenerate and switch branches of a conversation (a tree of runs, see
:mod:`conversations.history.tree`).

Branch operations wait for the conversation's active run to end (the user stops it or
lets it finish): a run answers the branch it started on, and a follow-up sent meanwhile
joins it, so the branch shown and the branch answered stay the same one.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from conversations.history.traces import mark_resuming
from conversations.history.tree import RunTree
from conversations.models import Conversation, Message, Run
from conversations.services import (
    active_run,
    message_content_clean,
    message_create,
    quota_refusal,
    run_start,
)
from core.errors import ApplicationError
from llms.selectors import model_get_for_user

BUSY = gettext_noop("Wait for the current answer to finish, or stop it, first.")


def lock(conversation_id: int) -> None:
    """The conversation's row lock, as a message post takes it: no run starts meanwhile."""
    Conversation.objects.filter(pk=conversation_id).update(updated_at=timezone.now())


def refuse_while_busy(conversation: Conversation) -> None:
    if active_run(conversation=conversation) is not None:
        raise ApplicationError(_(BUSY), code="conflict")


def refuse_over_quota(user) -> None:
    refusal = quota_refusal(user)
    if refusal:
        raise ApplicationError(refusal, code="quota")


def _question_run(tree: RunTree, message: Message) -> int:
    """The run answering ``message`` that is shown (the message must be a question)."""
    node = tree.answer_for_question(message.pk)
    if node is None or message.role != Message.Role.USER:
        raise ApplicationError(_("Only a question that was answered can be edited."))
    return node.run_id


def message_edit(*, message: Message, user, content: str) -> tuple[Message, Run]:
    """Ask ``message`` again as edited: a new question beside it, answered as a new
    branch (the original and its answers stay, one switch away)."""
    content = message_content_clean(content)
    conversation = message.conversation
    with transaction.atomic():
        lock(conversation.pk)
        refuse_while_busy(conversation)
        tree = RunTree.load(conversation.pk)
        original = tree.nodes[_question_run(tree, message)]
        refuse_over_quota(user)
        edited = message_create(conversation=conversation, role=Message.Role.USER, content=content)
        run = run_start(
            conversation=conversation, user=user, question=edited, parent_id=original.parent_id
        )
        _keep_resuming(original.run_id, run)
    return edited, run


def run_regenerate(*, run: Run, user, model_id: int | str | None = None) -> Run:
    """A new answer to ``run``'s question from the same history, beside ``run``;
    optionally by another model the user may use."""
    if run.trigger_message_id is None:
        raise ApplicationError(_("This answer has no question to answer again."))
    model = model_get_for_user(user=user, model_id=model_id) if model_id else None
    with transaction.atomic():
        lock(run.conversation_id)
        run = Run.objects.select_related("conversation", "trigger_message").get(pk=run.pk)
        refuse_while_busy(run.conversation)
        refuse_over_quota(user)
        regenerated = run_start(
            conversation=run.conversation,
            user=user,
            question=run.trigger_message,
            parent_id=run.parent_id,
            model=model,
            mode=run.mode,  # answered the way it was asked for
        )
        _keep_resuming(run.pk, regenerated)
        return regenerated


def run_retry(*, run: Run, user) -> Run:
    """Answer a failed, stopped or incomplete run's question again: a new answer beside
    it (the attempt stays, one click away)."""
    if run.status not in Run.RETRYABLE_STATUSES or run.trigger_message_id is None:
        raise ApplicationError(_("Only a failed, stopped or incomplete answer can be retried."))
    return run_regenerate(run=run, user=user)


def _keep_resuming(original_id: int, run: Run) -> None:
    """A new version of a run that went on from a paused run's trace (its note edited,
    its answer regenerated or retried) goes on from that trace too."""
    if Run.objects.filter(pk=original_id, resumes_parent=True).exists():
        mark_resuming(run)


def branch_select_run(*, run: Run) -> Run:
    """Show ``run`` among its sibling answers (and the branch last seen below it)."""
    with transaction.atomic():
        lock(run.conversation_id)
        refuse_while_busy(run.conversation)
        run.selected_at = timezone.now()
        Run.objects.filter(pk=run.pk).update(selected_at=run.selected_at)
    return run


def branch_select_question(*, message: Message) -> Run:
    """Show ``message`` among its sibling questions, with the answer last seen to it."""
    tree = RunTree.load(message.conversation_id)
    run = Run.objects.get(pk=_question_run(tree, message))
    return branch_select_run(run=run)
