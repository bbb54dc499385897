"""The signed-in user's interface language and time zone, applied to each request.

Django's LocaleMiddleware has already picked a language from the language cookie or
Accept-Language; a language the user chose in their settings (or the header's menu) wins
over both, everywhere they are signed in. Their time zone makes dates on the pages local.
The settings row is read once per request and kept on it for the template context.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone, translation

from conversations import user_settings
from conversations.models import Run, UserSettings
from core.outages import OUTAGES

__all__ = [
    "UserPreferencesMiddleware",
    "owner_language",
    "preferences_of",
    "run_language",
    "socket_language",
]

ATTRIBUTE = "agentsite_preferences"
ZONE_ATTRIBUTE = "agentsite_zone_activated"


def preferences_of(request: HttpRequest) -> UserSettings | None:
    """The signed-in user's settings row (read once per request); None when signed out."""
    if not hasattr(request, ATTRIBUTE):
        row = None
        try:
            user = getattr(request, "user", None)
            if user is not None and user.is_authenticated:
                row = user_settings.settings_for(user)
        except OUTAGES:  # the database is away: the page (a 503) in the browser's language
            row = None
        setattr(request, ATTRIBUTE, row)
    return getattr(request, ATTRIBUTE)


def owner_language(user: Any) -> str | None:
    """The language a user chose, for work done for them outside a request (a run's
    messages, the live frames of their chat); None: the site's default."""
    code = user_settings.settings_for(user).language
    return code or None


def run_language(run_id: int) -> str | None:
    """The language of a run's words: the one its conversation's owner chose, else the one
    of the request that asked for it (None: the site's default)."""
    found = Run.objects.filter(pk=run_id).values_list("conversation__owner", "language").first()
    if found is None:
        return None
    owner, asked_in = found
    chosen = UserSettings.objects.filter(user_id=owner).values_list("language", flat=True).first()
    return chosen or asked_in or None


def socket_language(scope: dict[str, Any]) -> str:
    """The language of a websocket's frames: the user's choice, else the language cookie,
    else the first supported language of the handshake's Accept-Language."""
    user = scope.get("user")
    chosen = owner_language(user) if user is not None and user.is_authenticated else None
    cookie = scope.get("cookies", {}).get(settings.LANGUAGE_COOKIE_NAME, "")
    headers = dict(scope.get("headers") or [])
    accepted = headers.get(b"accept-language", b"").decode("latin-1")
    wanted = [code for code in (chosen, cookie) if code]
    wanted += [part.split(";")[0].strip() for part in accepted.split(",") if part.strip()]
    for code in wanted:
        try:
            return translation.get_supported_language_variant(code.lower())
        except LookupError:
            continue
    return settings.LANGUAGE_CODE


class UserPreferencesMiddleware:
    """Activates the signed-in user's chosen language and time zone (after
    AuthenticationMiddleware and LocaleMiddleware).

    In ``process_view``, as LoginRequiredMiddleware loads the user: OutageMiddleware has
    loaded it by then, or answered 503 (a database outage in ``__call__`` would be a 500).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            return self.get_response(request)
        finally:
            if getattr(request, ZONE_ATTRIBUTE, False):
                timezone.deactivate()

    def process_view(self, request: HttpRequest, *_view: object) -> None:
        row = preferences_of(request) if _has_session_user(request) else None
        if row is None:
            return
        if row.language:
            translation.activate(row.language)
            request.LANGUAGE_CODE = translation.get_language()
        zone = _zone(row.timezone)
        if zone is not None:
            timezone.activate(zone)
            setattr(request, ZONE_ATTRIBUTE, True)


def _has_session_user(request: HttpRequest) -> bool:
    """Only requests that carry a session can be signed in here: health checks, metrics
    and API calls with a bearer token never load a user for this."""
    session = getattr(request, "session", None)
    return session is not None and bool(session.session_key)


def _zone(name: str) -> zoneinfo.ZoneInfo | None:
    if not name:
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None
