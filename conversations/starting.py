"""Starting a conversation: its row is created with its first message, never before.

"New chat" only opens an empty composer; the conversation exists once the user sends
something, so clicking it leaves no empty conversation behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from conversations.models import AgentMode, Conversation, Message, Run
from conversations.services import conversation_create, message_post
from llms.selectors import model_get_for_user


def conversation_start(
    *,
    owner,
    content: str,
    model_id: int | str | None = None,
    mode: str = "",
    file_ids: Sequence[Any] | None = None,
) -> tuple[Conversation, Message, Run]:
    """Create the conversation, save its first message and start its run, all or nothing.

    An empty or too long message, or a model the owner may not use, raises
    ``ApplicationError`` and creates nothing. ``model_id`` empty: the owner's default;
    ``mode`` empty: ReAct.
    """
    model = None
    if model_id not in (None, ""):
        model = model_get_for_user(user=owner, model_id=model_id)
    with transaction.atomic():
        conversation = conversation_create(owner=owner, model=model, mode=mode or AgentMode.REACT)
        # Raises before anything is written when the message is refused; the atomic
        # block then takes the new row back with it. The run launches on commit.
        message, run, _ = message_post(
            conversation=conversation, user=owner, content=content, file_ids=file_ids
        )
    return conversation, message, run
