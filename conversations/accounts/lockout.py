"""Lock-out after repeated failed logins and API tokens (django-axes), and what it says.

Axes records failures in the database (*Axes > Access attempts* in the admin, where
deleting a row unlocks; or ``manage.py axes_reset``, ``axes_reset_username``,
``axes_reset_ip``). Its settings are in ``agentsite/settings.py``:

- **Passwords** (the login form and the admin login): failures are counted per username
  *and* address. At ``AGENTSITE_LOGIN_FAILURE_LIMIT`` that pair is refused, the right
  password included, until ``AGENTSITE_LOGIN_COOLOFF_MINUTES`` pass without a try (each
  try restarts the wait). A guesser cannot lock a user out from everywhere.
- **Bearer tokens** are 256 random bits, not passwords: a wrong one attacks no account.
  Failed tokens are counted per address under one pseudo-username, :data:`TOKEN_USERNAME`,
  through axes' documented ``user_login_failed`` signal, with the same limit. A locked
  address's bearer requests are refused (429) before any token is checked, so a list
  of leaked tokens cannot be tried from it; refusals are not counted, so the lock ends
  at most a cool-off after the last failure.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

__all__ = [
    "TOKEN_USERNAME",
    "bearer_allowed",
    "bearer_failed",
    "bearer_lockout_response",
    "lockout_response",
]

# What axes records as the username of a failed bearer token: Django's usernames cannot
# hold brackets or spaces, so no real account shares the counter.
TOKEN_USERNAME = "[API token]"
TEMPLATE = "registration/locked_out.html"


def cool_off() -> timedelta:
    return settings.AXES_COOLOFF_TIME


def _wait_words() -> str:
    seconds = cool_off().total_seconds()
    if seconds < 120:
        count = math.ceil(seconds)
        return ngettext("%(count)d second", "%(count)d seconds", count) % {"count": count}
    count = math.ceil(seconds / 60)
    return ngettext("%(count)d minute", "%(count)d minutes", count) % {"count": count}


def _retry_after() -> str:
    return str(max(1, math.ceil(cool_off().total_seconds())))


def login_lockout_message() -> str:
    return _(
        "Too many failed logins for this account from your address. Try again in "
        "%(wait)s (each new try starts the wait again), or ask an administrator "
        "to unlock it."
    ) % {"wait": _wait_words()}


def bearer_lockout_message() -> str:
    return _(
        "Too many failed API token attempts from your address: every bearer request from "
        "it is refused for at most %(wait)s (see Retry-After). Check the token, or "
        "ask an administrator to unlock the address."
    ) % {"wait": _wait_words()}


def lockout_response(
    request: HttpRequest, original_response: Any = None, credentials: Any = None
) -> HttpResponse:
    """``AXES_LOCKOUT_CALLABLE``: axes' middleware answers a locked-out login with this."""
    if request.path.startswith("/api/"):
        return bearer_lockout_response()
    context = {"message": login_lockout_message(), "retry_url": request.get_full_path()}
    response = render(request, TEMPLATE, context, status=429)
    response["Retry-After"] = _retry_after()
    return response


def bearer_lockout_response() -> JsonResponse:
    return JsonResponse(
        {"error": bearer_lockout_message()}, status=429, headers={"Retry-After": _retry_after()}
    )


def _token_credentials() -> dict[str, str]:
    return {"username": TOKEN_USERNAME}


def bearer_allowed(request: HttpRequest) -> bool:
    """Whether the request's address may present a bearer token (not locked out)."""
    if not settings.AXES_ENABLED:
        return True
    return AxesProxyHandler.is_allowed(request, _token_credentials())


def bearer_failed(request: HttpRequest) -> bool:
    """Count a wrong or revoked token against the request's address; True if that failure
    locked the address out."""
    user_login_failed.send(sender=__name__, credentials=_token_credentials(), request=request)
    return bool(getattr(request, "axes_locked_out", False))
