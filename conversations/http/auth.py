"""The API's front door: bearer-token or session auth, CSRF, rate limit, JSON errors.

:func:`admit` is the front door itself; the API (:mod:`conversations.api.api`) calls it
from its authentication classes, for every operation (the event stream included):

- ``Authorization: Bearer <token>`` authenticates with a personal API token; a wrong or
  revoked token is refused (401) even if a session cookie is present. Without the header
  the browser session is used. Anonymous requests get 401 JSON, never a login redirect.
- Failed tokens count against the client's address: past the limit every bearer request
  from it is refused (429) for a while (:mod:`conversations.accounts.lockout`).
- Bearer requests need no CSRF token (a cross-site page cannot set that header);
  session-authenticated unsafe requests must pass Django's CSRF check, as forms do.
- Each client (token, or user for sessions) is rate limited (429 with Retry-After).
- ``ApplicationError`` becomes 400 (413 for ``too_large``, 404, 409, 429) with field
  messages (:func:`error_from_exception`), so views stay thin.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.utils.translation import gettext as _

from conversations.accounts import lockout
from conversations.accounts.middleware import sso_configured
from conversations.accounts.recheck import still_enabled
from conversations.http import ratelimit
from conversations.http.tokens import token_verify
from core.errors import ApplicationError

__all__ = [
    "admit",
    "error_from_exception",
    "json_error",
    "method_not_allowed",
    "rate_limit_headers",
]


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_csrf = CsrfViewMiddleware(lambda request: HttpResponse())


def json_error(
    status: int,
    message: str,
    *,
    fields: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JsonResponse:
    """The API's one error shape: ``{"error": message}`` plus ``fields`` for bad input."""
    body: dict[str, Any] = {"error": message}
    if fields is not None:
        body["fields"] = fields
    return JsonResponse(body, status=status, headers=headers)


def error_from_exception(exc: ApplicationError) -> JsonResponse:
    status = ERROR_STATUSES.get(exc.code, 400)
    return json_error(status, exc.message, fields=exc.extra or {})


ERROR_STATUSES = {"too_large": 413, "not_found": 404, "conflict": 409, "quota": 429}


def _unauthorized(message: str) -> JsonResponse:
    return json_error(401, message, headers={"WWW-Authenticate": 'Bearer realm="agentsite"'})


def method_not_allowed(request: HttpRequest, methods: tuple[str, ...]) -> JsonResponse:
    allowed = ", ".join(methods)
    message = _("Method %(method)s not allowed.") % {"method": request.method}
    return json_error(405, message, headers={"Allow": allowed})


def admit(request: HttpRequest) -> HttpResponse | None:
    """Authenticate, rate limit and CSRF-check ``request``: None to let it in, else the
    refusal to send (sync: it may touch the database)."""
    header = request.headers.get("Authorization", "")
    token = None
    if header:
        scheme, _space, credentials = header.partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            return _unauthorized(_("Use the header 'Authorization: Bearer <token>'."))
        if not lockout.bearer_allowed(request):  # refused before any token is checked
            return lockout.bearer_lockout_response()
        token = token_verify(credentials)
        if token is None:
            if lockout.bearer_failed(request):
                return lockout.bearer_lockout_response()
            return _unauthorized(_("The API token is wrong or has been revoked."))
        if sso_configured() and not still_enabled(token.user):
            return _unauthorized(_("This account has been disabled by the identity provider."))
        request.user = token.user
        request.api_token = token  # type: ignore[attr-defined]
    elif not request.user.is_authenticated:
        return _unauthorized(
            _(
                "Authentication required: send 'Authorization: Bearer <token>' "
                "(create a token under Settings > API tokens) or log in."
            )
        )
    client = f"token:{token.pk}" if token is not None else f"user:{request.user.pk}"
    verdict = ratelimit.rate_limit_hit(client)
    request.rate_limit = verdict  # type: ignore[attr-defined]
    if not verdict.allowed:
        return json_error(
            429,
            _("Too many requests: the limit is %(limit)s a minute. Try again in %(seconds)s s.")
            % {"limit": verdict.limit, "seconds": verdict.retry_after},
            headers={"Retry-After": str(verdict.retry_after)},
        )
    session_write = token is None and request.method not in SAFE_METHODS
    if session_write and _csrf.process_view(request, None, (), {}) is not None:
        return json_error(
            403,
            _(
                "CSRF check failed. Browser sessions must send the X-CSRFToken header; "
                "scripts should use a bearer token."
            ),
        )
    return None


def rate_limit_headers(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """``X-RateLimit-Limit`` and ``-Remaining`` on the response of an admitted request."""
    verdict = getattr(request, "rate_limit", None)
    if verdict is not None and verdict.limit:
        response.headers.setdefault("X-RateLimit-Limit", str(verdict.limit))
        response.headers.setdefault("X-RateLimit-Remaining", str(verdict.remaining))
    return response
