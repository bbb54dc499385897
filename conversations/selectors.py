"""Read-side queries for conversations. Every query is scoped to its owner."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.shortcuts import get_object_or_404

from conversations.models import Conversation


def conversation_list(*, user, search: str = "", archived: bool = False) -> QuerySet:
    """The user's conversations, newest first, optionally filtered by title or content."""
    qs = Conversation.objects.filter(owner=user, archived=archived)
    if search:
        qs = qs.filter(Q(title__icontains=search) | Q(messages__content__icontains=search))
        qs = qs.distinct()
    return qs.order_by("-updated_at", "-id")


def conversation_get(*, user, conversation_id: int) -> Conversation:
    """The conversation if ``user`` owns it; 404 otherwise (never reveal others' ids)."""
    return get_object_or_404(Conversation, pk=conversation_id, owner=user)


def conversation_owned_by(*, user_id: int | None, conversation_id: int) -> bool:
    if not user_id:
        return False
    return Conversation.objects.filter(pk=conversation_id, owner_id=user_id).exists()
