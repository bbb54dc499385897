"""Starting a conversation: its row is created with its first message, never before.

"New chat" only opens an empty composer; the conversation exists once the user sends
something, so clicking it leaves no empty conversation behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from conversations import presets
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
    preset_id: int | str | None = None,
) -> tuple[Conversation, Message, Run]:
    """Create the conversation, save its first message and start its run, all or nothing.

    An empty or too long message, a model the owner may not use, or a preset naming one
    (or a tool they may not use), raises ``ApplicationError`` and creates nothing.
    ``model_id`` empty: the preset's, else the owner's default; ``mode`` empty: the
    preset's, else ReAct.
    """
    model = None
    if model_id not in (None, ""):
        model = model_get_for_user(user=owner, model_id=model_id)
    preset = values = None
    if preset_id not in (None, ""):
        preset = presets.preset_get_readable(owner, int(preset_id))
        values = presets.preset_settings_for(owner, preset)
        model = model or values["model"]
        mode = mode or values["mode"]
    with transaction.atomic():
        conversation = conversation_create(owner=owner, model=model, mode=mode or AgentMode.REACT)
        if preset is not None and values is not None:
            presets.conversation_apply_preset(conversation, preset, values)
        # Raises before anything is written when the message is refused; the atomic
        # block then takes the new row back with it. The run launches on commit.
        message, run, _ = message_post(
            conversation=conversation, user=owner, content=content, file_ids=file_ids
        )
    return conversation, message, run
