"""The Settings page (issue 46): the instructions the agent gets in every chat, the
interface language, the time zone and the theme. :mod:`conversations.user_settings`
checks and keeps them; a refusal shows the form again, the message by its field and
what the user typed kept."""

from __future__ import annotations

import zoneinfo
from functools import cache

from django.conf import settings
from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from conversations import user_settings
from conversations.models import UserSettings
from core.errors import ApplicationError

TEMPLATE = "conversations/settings.html"
INVALID = 422  # a refused form (never 400, which django-htmx's debug mode turns into a page)
FIELDS = ("instructions", "language", "timezone", "theme")


@cache
def zone_names() -> list[str]:
    """Every IANA zone this machine knows, for the time zone select."""
    return sorted(name for name in zoneinfo.available_timezones() if "/" in name)


@require_http_methods(["GET", "POST"])
def settings_page(request: HttpRequest) -> HttpResponse:
    row = user_settings.settings_for(request.user)
    form = {name: getattr(row, name) for name in FIELDS}
    errors: dict[str, str] = {}
    if request.method == "POST":
        form = {name: request.POST.get(name, "") for name in FIELDS}
        try:
            user_settings.settings_update(request.user, **form)
        except ApplicationError as exc:
            errors = {field: messages[0] for field, messages in exc.extra.items()}
        else:
            flash.success(request, _("Settings saved."))
            return redirect("user_settings")
    context = {
        "form": form,
        "errors": errors,
        "languages": settings.LANGUAGES,
        "zones": zone_names(),
        "server_zone": settings.TIME_ZONE,
        "themes": UserSettings.Theme.choices,
        "instructions_max": user_settings.INSTRUCTIONS_MAX_CHARS,
    }
    return render(request, TEMPLATE, context, status=INVALID if errors else 200)
