"""Your own settings: instructions the agent gets in every conversation, language, time
zone, theme (:mod:`conversations.user_settings` checks and keeps them)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from conversations import user_settings
from conversations.api.docs import errors
from conversations.api.schemas import UserSettingsChange, UserSettingsOut
from conversations.models import UserSettings

router = Router(tags=["settings"])


def settings_out(row: UserSettings) -> dict[str, Any]:
    return {
        "instructions": row.instructions,
        "language": row.language,
        "timezone": row.timezone,
        "theme": row.theme,
    }


@router.get(
    "/me/settings",
    response={200: UserSettingsOut, **errors()},
    operation_id="getMySettings",
    summary="Your settings",
    url_name="api_my_settings",
)
def my_settings(request: HttpRequest):
    return settings_out(user_settings.settings_for(request.user))


@router.patch(
    "/me/settings",
    response={200: UserSettingsOut, **errors(400)},
    operation_id="updateMySettings",
    summary="Change your settings (those given; a bad one is a 400 naming it, none changed)",
)
def my_settings_update(request: HttpRequest, payload: UserSettingsChange):
    changes = {name: getattr(payload, name) for name in payload.model_fields_set}
    return settings_out(user_settings.settings_update(request.user, **changes))
