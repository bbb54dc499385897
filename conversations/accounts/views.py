"""The login and logout pages, with the team's single sign-on.

The login page offers the identity provider's button when OpenID Connect is configured,
says why a sign-in through it failed, and hides the password form when the site is
"SSO only" (``AGENTSITE_SSO_ONLY``; a local admin can still sign in at ``/admin/login/``
when the provider is down). Logging out of a provider-signed session also logs out at
the provider (RP-initiated logout), so the next visitor at a shared computer is asked
for a password again.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.views import LoginView, LogoutView
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from conversations.accounts import oidc

__all__ = ["SSO_MESSAGES", "SignInView", "SignOutView"]

# What the login page says after ``?sso=…`` (``%(name)s``: the provider's name).
SSO_MESSAGES = {
    oidc.FAILED: gettext_lazy(
        "Signing in through %(name)s did not work. Try again, or ask an administrator."
    ),
    oidc.UNREACHABLE: gettext_lazy("%(name)s cannot be reached right now. Try again in a minute."),
    "disabled": gettext_lazy("Your account has been disabled at %(name)s. Ask an administrator."),
}
# ID tokens stored by mozilla-django-oidc (OIDC_STORE_ID_TOKEN) for the logout's hint.
ID_TOKEN_SESSION_KEY = "oidc_id_token"


def sso_enabled() -> bool:
    return bool(settings.AGENTSITE_OIDC_ISSUER)


def password_sign_in_allowed() -> bool:
    return not (sso_enabled() and settings.AGENTSITE_SSO_ONLY)


class SignInView(LoginView):
    """Django's login page, with the provider's button and its messages."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        name = settings.AGENTSITE_OIDC_NAME
        message = SSO_MESSAGES.get(self.request.GET.get("sso", ""))
        context.update(
            sso_enabled=sso_enabled(),
            sso_name=name,
            sso_error=message % {"name": name} if message and sso_enabled() else "",
            password_form=password_sign_in_allowed(),
        )
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not password_sign_in_allowed():
            context = self.get_context_data()
            context["sso_error"] = _("Sign in through %(name)s.") % {
                "name": settings.AGENTSITE_OIDC_NAME
            }
            return self.render_to_response(context, status=403)
        return super().post(request, *args, **kwargs)


class SignOutView(LogoutView):
    """Django's logout, then the provider's when the session came from it."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        id_token = request.session.get(ID_TOKEN_SESSION_KEY)
        response = super().post(request, *args, **kwargs)
        if id_token is not None and sso_enabled():
            return HttpResponseRedirect(oidc.provider_logout_url(request, id_token))
        return response
