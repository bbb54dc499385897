"""Sessions of users the identity provider or directory no longer lets in end here.

On a site with single sign-on, each request of a signed-in user asks
:func:`.recheck.still_enabled` (a cache read, and a question to the provider once per
``AGENTSITE_SSO_RECHECK_MINUTES``); a disabled user is logged out and a page request goes
to the login page saying why. API requests with a bearer token are checked at the API's
front door (``conversations/http/auth.py``) instead.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from conversations.accounts.recheck import still_enabled

__all__ = ["ProviderRecheckMiddleware", "sso_configured"]


def sso_configured() -> bool:
    return bool(settings.AGENTSITE_OIDC_ISSUER or settings.AUTH_LDAP_SERVER_URI)


class ProviderRecheckMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if sso_configured() and "Authorization" not in request.headers:
            user = request.user
            if user.is_authenticated and not still_enabled(user):
                logout(request)
                if not request.path.startswith("/api/"):
                    return HttpResponseRedirect(f"{reverse('login')}?sso=disabled")
        return self.get_response(request)
