"""Write-side business logic for conversations (HackSoft style: keyword-only services)."""

from __future__ import annotations

from conversations.models import Conversation


def conversation_create(*, owner, title: str = "", model=None) -> Conversation:
    return Conversation.objects.create(owner=owner, title=title.strip()[:200], model=model)
