"""Template context every page gets: the signed-in user's chosen theme (their Settings),
so base.html can pin light or dark instead of following the system."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from conversations.models import UserSettings
from conversations.preferences import preferences_of


def preferences(request: HttpRequest) -> dict[str, Any]:
    row = preferences_of(request)
    return {"theme": row.theme if row is not None else UserSettings.Theme.SYSTEM}
