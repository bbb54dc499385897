"""Is a signed-in user still enabled at the team's identity provider or directory?

Someone disabled at the provider cannot sign in again, but a session cookie or a personal
API token would go on working. So, every ``AGENTSITE_SSO_RECHECK_MINUTES``, a request of a
user who signs in through the provider asks it again:

- OpenID Connect: the refresh token kept at sign-in is exchanged at the token endpoint;
  a provider that refuses it (``invalid_grant``: disabled, deleted, or the grant revoked)
  disables the user here too. The answer's new access token reads the userinfo again, so
  groups stay in step between sign-ins.
- LDAP: the directory is searched for the user with the service account; gone, or out of
  the required group, disables them.

A provider that does not answer changes nothing (it is asked again at the next request):
an outage of the identity provider must not lock the whole team out of the API. A user
disabled here this way is enabled again when the provider lets them sign in.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import timedelta
from typing import Any

import httpx
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from redis.exceptions import RedisError

from conversations.accounts import discovery, identities
from conversations.accounts.claims import group_names
from conversations.models import ExternalIdentity

__all__ = ["recheck", "still_enabled"]

logger = logging.getLogger(__name__)


def _cache_key(user_id: Any) -> str:
    return f"conversations:sso-checked:{user_id}"


def still_enabled(user: Any) -> bool:
    """False if the provider no longer lets ``user`` in (they are then disabled here);
    cheap when asked again within the recheck period (one cache read)."""
    period = timedelta(minutes=settings.AGENTSITE_SSO_RECHECK_MINUTES)
    key = _cache_key(user.pk)
    with contextlib.suppress(RedisError):  # the database below answers meanwhile
        if cache.get(key):
            return True
    identity = identities.identity_of(user)
    if identity is not None and timezone.now() - identity.checked_at >= period:
        recheck(identity)
        user.refresh_from_db(fields=["is_active"])
    if user.is_active and period.total_seconds() >= 1:
        with contextlib.suppress(RedisError):
            cache.set(key, True, int(period.total_seconds()))
    return user.is_active


def recheck(identity: ExternalIdentity) -> None:
    """Ask the identity's source now; disable the user if it refuses them."""
    try:
        if identity.source == ExternalIdentity.Source.OIDC:
            enabled = _oidc_enabled(identity)
        else:
            enabled = _ldap_enabled(identity)
    except (httpx.HTTPError, discovery.DiscoveryError, OSError) as exc:
        logger.warning(
            "%s provider unreachable, user %s kept: %s", identity.source, identity.user_id, exc
        )
        return
    except _ldap_unreachable() as exc:
        logger.warning("LDAP directory unreachable, user %s kept: %s", identity.user_id, exc)
        return
    if enabled is None:  # nothing to ask with (no refresh token)
        return
    if enabled:
        identity.checked_at = timezone.now()
        identity.save(update_fields=["checked_at"])
    else:
        identities.deactivate(identity, reason=f"refused by the {identity.source} provider")


def _oidc_enabled(identity: ExternalIdentity) -> bool | None:
    if not identity.refresh_token or not settings.AGENTSITE_OIDC_ISSUER:
        return None
    response = httpx.post(
        discovery.endpoint("token_endpoint"),
        data={
            "grant_type": "refresh_token",
            "refresh_token": identity.refresh_token,
            "client_id": settings.OIDC_RP_CLIENT_ID,
            "client_secret": settings.OIDC_RP_CLIENT_SECRET,
        },
        timeout=settings.OIDC_TIMEOUT,
    )
    if response.status_code in (400, 401):
        error = _json(response).get("error")
        if error in ("invalid_grant", "unauthorized_client", "invalid_client"):
            logger.info("provider refused user %s: %s", identity.user_id, error)
            return False
    response.raise_for_status()
    tokens = _json(response)
    refresh_token = tokens.get("refresh_token")
    if isinstance(refresh_token, str) and refresh_token != identity.refresh_token:
        identity.refresh_token = refresh_token  # rotated: the old one is spent
        identity.save(update_fields=["refresh_token"])
    access_token = tokens.get("access_token")
    if isinstance(access_token, str):
        _sync_groups_from_userinfo(identity, access_token)
    return True


def _sync_groups_from_userinfo(identity: ExternalIdentity, access_token: str) -> None:
    response = httpx.get(
        discovery.endpoint("userinfo_endpoint"),
        headers={"Authorization": f"Bearer {access_token}"},
        timeout=settings.OIDC_TIMEOUT,
    )
    response.raise_for_status()
    claims = _json(response)
    if claims.get("sub") == identity.subject:
        identities.sync_groups(identity, group_names(claims))


def _ldap_enabled(identity: ExternalIdentity) -> bool | None:
    if not settings.AUTH_LDAP_SERVER_URI:
        return None
    # Here, not at the top: python-ldap is the optional `ldap` extra.
    from conversations.accounts.ldapauth import look_up

    user = look_up(identity)
    return user is not None and user.is_active


def _ldap_unreachable() -> tuple[type[BaseException], ...]:
    if not settings.AUTH_LDAP_SERVER_URI:
        return ()
    # Here, not at the top: python-ldap is the optional `ldap` extra.
    from conversations.accounts.ldapauth import DirectoryUnreachable

    return (DirectoryUnreachable,)


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        value = response.json()
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
