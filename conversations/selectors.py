"""Read-side queries for conversations: data, never HTML. Every query that takes a user is
scoped to its owner; the others take ids the caller already checked."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from django.shortcuts import get_object_or_404

from conversations.history.numbering import last_event_seq_of
from conversations.history.tree import RunTree, path_filter
from conversations.models import Conversation, Message, Run, RunEvent
from conversations.organise.tags import tag_key
from knowledge import selectors as knowledge_selectors

Entry = tuple[int, int, str, dict[str, Any]]  # (seq, run_id, channel, payload)


NO_FOLDER = 0  # conversation_list's folder: in none (no folder's id is 0)


def conversation_list(
    *,
    user,
    search: str = "",
    archived: bool = False,
    tag: str = "",
    folder: int | None = None,
    pinned: bool | None = None,
) -> QuerySet:
    """The user's conversations, newest first, optionally filtered by title or content,
    by a tag's name (any case), by folder (an id, or ``NO_FOLDER``; sub-folders' chats
    are not their parent's) and by pin; each with ``last_event_seq``, its highest event
    number."""
    qs = Conversation.objects.filter(owner=user, archived=archived)
    if search:
        qs = qs.filter(Q(title__icontains=search) | Q(messages__content__icontains=search))
        qs = qs.distinct()
    if tag:
        qs = qs.filter(tags__key=tag_key(tag))  # one tag per key: no row twice
    if folder is not None:
        qs = qs.filter(folder=folder) if folder != NO_FOLDER else qs.filter(folder__isnull=True)
    if pinned is not None:
        qs = qs.filter(pinned_at__isnull=not pinned)
    qs = qs.annotate(last_event_seq=last_event_seq_of("pk"))
    return qs.order_by("-updated_at", "-id")


def conversation_get(*, user, conversation_id: int) -> Conversation:
    """The conversation if ``user`` owns it; 404 otherwise (never reveal others' ids)."""
    return get_object_or_404(Conversation, pk=conversation_id, owner=user)


def conversation_owned(*, user_id: int | None, conversation_id: int) -> bool:
    return (
        bool(user_id) and Conversation.objects.filter(pk=conversation_id, owner_id=user_id).exists()
    )


def conversation_knowledge(*, conversation: Conversation, user) -> QuerySet:
    """The knowledge bases attached to the conversation that ``user`` may still read (a
    base unshared since is neither searched nor shown)."""
    return knowledge_selectors.readable_bases(user).filter(conversations=conversation.pk)


def conversation_tree(*, conversation: Conversation) -> RunTree:
    return RunTree.load(conversation.pk)


def branch_messages(
    *, conversation: Conversation, tree: RunTree | None = None, upto_run_id: int | None = None
) -> list[Message]:
    """The messages of the branch the user is on (or of the branch ending at
    ``upto_run_id``), in order: what the page shows and what the model reads."""
    tree = tree if tree is not None else RunTree.load(conversation.pk)
    path = tree.path_to(upto_run_id) if upto_run_id is not None else tree.selected_path()
    return path_filter(tree, path, conversation.messages.prefetch_related("attachments__file"))


def events_after(
    conversation_id: int, after_seq: int = 0, *, run_id: int | None = None
) -> list[Entry]:
    """The logged events numbered after ``after_seq``, in order."""
    rows = RunEvent.objects.filter(conversation_id=conversation_id, seq__gt=after_seq)
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    return list(rows.order_by("seq").values_list("seq", "run_id", "channel", "payload"))


def runs_with_events_after(conversation_id: int, after_seq: int) -> tuple[list[int], int]:
    """The runs with logged events numbered after ``after_seq`` (in the order of their first
    such event), and the last number; without reading the payloads."""
    rows = RunEvent.objects.filter(conversation_id=conversation_id, seq__gt=after_seq)
    numbered = list(rows.order_by("seq").values_list("seq", "run_id"))
    if not numbered:
        return [], after_seq
    return list(dict.fromkeys(run_id for _seq, run_id in numbered)), numbered[-1][0]


def message_get(*, user, message_id: int):
    return get_object_or_404(Message, pk=message_id, conversation__owner=user)


def run_get(*, user, run_id: int):
    return get_object_or_404(Run, pk=run_id, conversation__owner=user)


def run_inject_ids(run_id: int) -> list[int]:
    """Delivered follow-ups of a run, in delivery order (matches its inject events)."""
    return list(
        Message.objects.filter(run_id=run_id, kind=Message.Kind.INJECT, delivered_at__isnull=False)
        .order_by("delivered_at", "seq")
        .values_list("pk", flat=True)
    )
