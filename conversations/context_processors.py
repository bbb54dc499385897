"""Template context every page gets: the signed-in user's chosen theme (their Settings),
so base.html can pin light or dark instead of following the system."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from conversations import user_settings
from conversations.models import UserSettings


def preferences(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"theme": UserSettings.Theme.SYSTEM}
    return {"theme": user_settings.settings_for(user).theme}
