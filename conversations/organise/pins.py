"""Pinned conversations: the sidebar lists them first, the pin made last on top."""

from __future__ import annotations

from django.utils import timezone

from conversations.models import Conversation


def conversation_pin(*, conversation: Conversation, pinned: bool) -> Conversation:
    """Pin or unpin. Pinning a pinned chat keeps its place; like moving it into a folder,
    this leaves ``updated_at`` (the chat's place among the others) as it was."""
    if pinned == (conversation.pinned_at is not None):
        return conversation
    conversation.pinned_at = timezone.now() if pinned else None
    Conversation.objects.filter(pk=conversation.pk).update(pinned_at=conversation.pinned_at)
    return conversation
