"""Sign-in through the team's OpenID Connect provider, with mozilla-django-oidc.

The library runs the authorization-code flow (state, nonce, PKCE) and checks the ID
token's signature and expiry; this module plugs in through its documented extension
points, the backend's and views' methods:

- endpoints come from the issuer's discovery document (:mod:`.discovery`), read when a
  sign-in first needs them, never at start-up;
- the ID token must also name this site as its audience and the configured issuer;
- users are found by the provider's ``sub`` (:class:`ExternalIdentity`), never by e-mail
  (two providers, or a changed address, must not hand over someone's account), created
  on first sign-in, and their groups follow the groups claim at each sign-in;
- the refresh token is kept (encrypted) so the site can ask the provider later whether
  the account is still enabled (:mod:`.directory`);
- a failed sign-in says why on the login page and in the audit log, never a 500.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

import jwt
from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import resolve_url
from django.urls import reverse
from django.utils.functional import lazy
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)
from requests.exceptions import RequestException

from audit.services import record
from conversations.accounts import discovery, identities
from conversations.accounts.claims import group_names
from conversations.accounts.users import cached_user
from conversations.models import ExternalIdentity

__all__ = [
    "FAILED",
    "UNREACHABLE",
    "SSOBackend",
    "SSOCallbackView",
    "provider_logout_url",
    "start_sign_in",
]

logger = logging.getLogger(__name__)

SOURCE = ExternalIdentity.Source.OIDC
# The login page's ``?sso=`` values: what it tells the user.
FAILED = "failed"
UNREACHABLE = "unreachable"

# The library's endpoint settings, and the discovery document's names for them.
DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
# Read when a request uses it, not when the library's classes are built: Django builds
# every authentication backend for each password sign-in too.
_lazy_endpoint = lazy(discovery.endpoint, str)


def discovered_setting(attr: str, *default: Any) -> Any:
    """The library's settings look-up, with the provider's endpoints from discovery."""
    if attr in DISCOVERED:
        return _lazy_endpoint(DISCOVERED[attr])
    return import_from_settings(attr, *default)


class SSOBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend with discovery, audience checks, users by subject
    and groups from the provider."""

    get_settings = staticmethod(discovered_setting)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        """The library's code flow; a refused token or an unreachable provider is a
        failed sign-in (audited, said on the login page), not an error page."""
        self.token_info: dict[str, Any] = {}
        try:
            return super().authenticate(request, **kwargs)
        except (SuspiciousOperation, RequestException, discovery.DiscoveryError) as exc:
            logger.warning("single sign-on refused: %s", exc)
            record(
                "sso.login_failed",
                actor_name="oidc sign-in",
                changes={"reason": [None, str(exc)[:300]]},
                request=request,
            )
            return None

    def get_token(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The token response, kept for its refresh token."""
        self.token_info = super().get_token(payload)
        return self.token_info

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        """Signature, expiry and nonce (the library), then audience and issuer."""
        try:
            payload = super().verify_token(token, **kwargs)
        except jwt.InvalidTokenError as exc:  # expired, not yet valid…
            raise SuspiciousOperation(f"the ID token is not valid: {exc}") from exc
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("the ID token was issued for another client")
        issuer = str(payload.get("iss", "")).rstrip("/")
        if issuer != settings.AGENTSITE_OIDC_ISSUER.rstrip("/"):
            raise SuspiciousOperation(f"the ID token comes from another issuer ({issuer})")
        return payload

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        return isinstance(claims.get("sub"), str) and bool(claims["sub"])

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        return self.UserModel.objects.filter(
            external_identities__source=SOURCE, external_identities__subject=claims["sub"]
        )

    def create_user(self, claims: dict[str, Any]) -> Any:
        wanted = claims.get("preferred_username") or str(claims.get("email", "")).split("@")[0]
        # No password (an unusable one): this user signs in at the provider only.
        user = self.UserModel.objects.create_user(
            identities.unique_username(wanted or claims["sub"]), email=claims.get("email", "")
        )
        return self.update_user(user, claims)

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        """Name and e-mail as the provider has them now; groups in step with its claim."""
        fields = {
            "email": claims.get("email") or user.email,
            "first_name": (claims.get("given_name") or user.first_name)[:150],
            "last_name": (claims.get("family_name") or user.last_name)[:150],
        }
        changed = [name for name, value in fields.items() if getattr(user, name) != value]
        for name in changed:
            setattr(user, name, fields[name])
        if changed:
            user.save(update_fields=changed)
        identity = identities.link(user, source=SOURCE, subject=claims["sub"])
        identities.reactivate(identity)
        refresh_token = self.token_info.get("refresh_token")
        if isinstance(refresh_token, str) and refresh_token != identity.refresh_token:
            identity.refresh_token = refresh_token
            identity.save(update_fields=["refresh_token"])
        identities.sync_groups(identity, group_names(claims))
        user.refresh_from_db(fields=["is_active"])
        return user

    def get_user(self, user_id: Any) -> Any:
        """Each request's user, through the cache, and only while active (the library's
        own reads the database and lets a disabled user's session go on)."""
        user = cached_user(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None


class SSOAuthenticationRequestView(OIDCAuthenticationRequestView):
    get_settings = staticmethod(discovered_setting)


class SSOCallbackView(OIDCAuthenticationCallbackView):
    get_settings = staticmethod(discovered_setting)

    @property
    def failure_url(self) -> str:
        return f"{reverse('login')}?sso={FAILED}"


def start_sign_in(request: HttpRequest) -> HttpResponse:
    """Send the browser to the provider, or back to the login page saying the provider
    cannot be reached (its discovery document is read first)."""
    try:
        discovery.provider_configuration()
    except discovery.DiscoveryError as exc:
        logger.warning("single sign-on unavailable: %s", exc)
        return HttpResponseRedirect(f"{reverse('login')}?sso={UNREACHABLE}")
    return SSOAuthenticationRequestView.as_view()(request)


def provider_logout_url(request: HttpRequest, id_token: str) -> str:
    """Where to send a browser after the site's logout: the provider's end-session
    endpoint (RP-initiated logout) coming back to the login page, or the login page if
    the provider offers none."""
    after = request.build_absolute_uri(resolve_url(settings.LOGOUT_REDIRECT_URL))
    try:
        end_session = discovery.endpoint("end_session_endpoint")
    except discovery.DiscoveryError as exc:
        logger.warning("logout at the identity provider skipped: %s", exc)
        return after
    if not end_session:
        return after
    query = {"client_id": settings.OIDC_RP_CLIENT_ID, "post_logout_redirect_uri": after}
    if id_token:
        query["id_token_hint"] = id_token
    separator = "&" if "?" in end_session else "?"
    return f"{end_session}{separator}{urlencode(query)}"
