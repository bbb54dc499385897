"""A user's own settings (issue 46): custom instructions the agent gets in every chat,
the interface language, the time zone the agent's clock and the pages use, the theme."""

from __future__ import annotations

import zoneinfo
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _

from conversations.models import UserSettings
from core.errors import ApplicationError

__all__ = [
    "INSTRUCTIONS_MAX_CHARS",
    "language_name",
    "settings_for",
    "settings_update",
    "zone_of",
]

INSTRUCTIONS_MAX_CHARS = 10_000
# English names for the agent's instructions (the model reads English prompts).
LANGUAGE_NAMES_FOR_THE_MODEL = {"en": "English", "zh-hans": "Simplified Chinese", "ja": "Japanese"}


def settings_for(user: Any) -> UserSettings:
    """``user``'s settings (the defaults, unsaved, until they change one)."""
    found = UserSettings.objects.filter(user=user).first()
    return found if found is not None else UserSettings(user=user)


def _refuse(field: str, message: str) -> ApplicationError:
    return ApplicationError(message, extra={field: [message]})


def _language(value: str) -> str:
    codes = [code for code, _name in settings.LANGUAGES]
    if value and value not in codes:
        raise _refuse(
            "language",
            _("Unknown language %(value)s: use one of %(codes)s.")
            % {"value": repr(value), "codes": ", ".join(codes)},
        )
    return value


def _zone(value: str) -> str:
    if not value:
        return ""
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise _refuse(
            "timezone",
            _("Unknown time zone %(value)s: use an IANA name such as Europe/Paris.")
            % {"value": repr(value)},
        ) from None
    return value


def _theme(value: str) -> str:
    if value not in UserSettings.Theme.values:
        choices = ", ".join(UserSettings.Theme.values)
        raise _refuse(
            "theme",
            _("Unknown theme %(value)s: use one of %(choices)s.")
            % {"value": repr(value), "choices": choices},
        )
    return value


def _instructions(value: str) -> str:
    text = value.strip()
    if len(text) > INSTRUCTIONS_MAX_CHARS:
        raise _refuse(
            "instructions",
            _("Instructions have at most %(limit)s characters (these have %(count)s).")
            % {"limit": f"{INSTRUCTIONS_MAX_CHARS:,}", "count": f"{len(text):,}"},
        )
    return text


CHECKS = {
    "instructions": _instructions,
    "language": _language,
    "timezone": _zone,
    "theme": _theme,
}


def settings_update(user: Any, **changes: str) -> UserSettings:
    """Change the given settings, each checked (a 400 naming the field), all or none."""
    cleaned = {name: CHECKS[name](value) for name, value in changes.items()}
    with transaction.atomic():
        row, _created = UserSettings.objects.select_for_update().get_or_create(user=user)
        for name, value in cleaned.items():
            setattr(row, name, value)
        row.save()
    return row


def zone_of(row: UserSettings) -> zoneinfo.ZoneInfo:
    """The user's time zone, else the server's."""
    return zoneinfo.ZoneInfo(row.timezone or settings.TIME_ZONE)


def language_name(code: str) -> str:
    """The English name of a language code of ``settings.LANGUAGES`` ("" when unset)."""
    return LANGUAGE_NAMES_FOR_THE_MODEL.get(code, "")
