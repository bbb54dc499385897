"""What the agent is told in a run besides the engine's own rules (issue 46), in this
order, each part only when it has text:

1. the model's default system prompt (set by an admin on the model);
2. the user's custom instructions (their Settings page);
3. the chat's own system prompt;
4. the environment: the date and time in the user's time zone, the user's name and
   language, the tools on offer.

Later parts are the more specific, and models weigh what comes last: a chat's prompt can
narrow the user's habits, which can narrow the admin's default. The environment is
rebuilt before every LLM call (the engine takes the prompt as a function), so the time
moves while a long run goes on; the rest is read once, when the run is prepared, since
the prompt is built on the run's event loop where the database is not reached.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone

from conversations import user_settings
from conversations.models import Conversation
from llms.models import LLMModel

__all__ = ["environment", "system_prompt_for"]


def environment(
    *,
    now: datetime,
    zone: zoneinfo.ZoneInfo,
    user_name: str,
    language: str,
    tool_names: Sequence[str],
) -> str:
    """The environment part of the system prompt, as of ``now``."""
    local = now.astimezone(zone)
    offset = local.strftime("%z")
    lines = [
        "## Environment",
        f"- Current date and time: {local:%A %d %B %Y, %H:%M} ({zone.key}, UTC"
        f"{offset[:3]}:{offset[3:]})",
        f"- User: {user_name}",
    ]
    if language:
        lines.append(
            f"- The user's language is {language}: answer in {language} unless they write "
            "in another language or ask for one."
        )
    else:
        lines.append("- Answer in the language the user writes in.")
    lines.append(
        f"- Tools on offer: {', '.join(tool_names)}" if tool_names else "- No tools on offer."
    )
    return "\n".join(lines)


def _display_name(user: Any) -> str:
    full = user.get_full_name().strip() if hasattr(user, "get_full_name") else ""
    return f"{full} ({user.get_username()})" if full else user.get_username()


def system_prompt_for(
    *,
    conversation: Conversation,
    model: LLMModel,
    tool_names: Sequence[str],
    clock: Callable[[], datetime] = timezone.now,
) -> Callable[[], str]:
    """The run's system prompt as the engine asks for it before each call (database
    reads happen here, not then)."""
    user = conversation.owner
    row = user_settings.settings_for(user)
    fixed = [
        part.strip()
        for part in (
            model.system_prompt,
            f"## The user's instructions\n\n{row.instructions}" if row.instructions else "",
            f"## This conversation's instructions\n\n{conversation.system_prompt}"
            if conversation.system_prompt
            else "",
        )
        if part and part.strip()
    ]
    zone = user_settings.zone_of(row)
    name = _display_name(user)
    language = user_settings.language_name(row.language)
    names = list(tool_names)

    def prompt() -> str:
        now = environment(
            now=clock(), zone=zone, user_name=name, language=language, tool_names=names
        )
        return "\n\n".join([*fixed, now])

    return prompt
