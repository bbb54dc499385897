"""Personal API tokens: create, list, revoke, authenticate.

A token is ``as_`` + 43 URL-safe characters (256 random bits). The database keeps its
SHA-256 and its first 8 characters only, so a leaked database or backup authenticates
nobody; a plain (unsalted) hash is enough because the secret is random, not a password.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.services import Client, record
from conversations.models import APIToken
from core.errors import ApplicationError

__all__ = [
    "TOKEN_PREFIX",
    "token_authenticate",
    "token_create",
    "token_get",
    "token_hash",
    "token_list",
    "token_revoke",
    "token_verify",
]

TOKEN_PREFIX = "as_"
PREFIX_CHARS = 8
NAME_MAX_CHARS = 100
# last_used_at is a hint for the owner, not an audit log: one write a minute is plenty.
LAST_USED_PRECISION = timedelta(minutes=1)


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def token_create(*, user, name: str = "", client: Client | None = None) -> tuple[APIToken, str]:
    """Create a token for ``user``; returns the row and the plaintext (shown once).

    Audited as ``token.created`` (the plaintext and its hash never reach the log)."""
    name = (name or "").strip()
    if len(name) > NAME_MAX_CHARS:
        raise ApplicationError(
            _("The token name is too long."),
            extra={"name": [_("At most %(n)s characters.") % {"n": NAME_MAX_CHARS}]},
        )
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = APIToken.objects.create(
        user=user,
        name=name or "API token",
        prefix=raw[:PREFIX_CHARS],
        token_hash=token_hash(raw),
    )
    record(
        "token.created",
        actor=user,
        target=token,
        target_label=f"{token.name} ({token.prefix}…)",
        client=client,
    )
    return token, raw


def token_list(*, user) -> QuerySet[APIToken]:
    """The user's tokens, newest first (revoked ones included, marked as such)."""
    return APIToken.objects.filter(user=user).order_by("-created_at", "-id")


def token_get(*, user, token_id: int) -> APIToken:
    """One of the user's tokens; 404 for anyone else's."""
    return get_object_or_404(APIToken, pk=token_id, user=user)


def token_revoke(*, token: APIToken, actor=None, client: Client | None = None) -> APIToken:
    """Revoke a token for good (idempotent: the first revocation time is kept).

    Audited as ``token.revoked`` once, by ``actor`` (default: the token's owner)."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        revoked = APIToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=token.revoked_at
        )
        if revoked:
            record(
                "token.revoked",
                actor=actor if actor is not None else token.user,
                target=token,
                target_label=f"{token.name} ({token.prefix}…)",
                client=client,
            )
    return token


def token_verify(raw: str | None) -> APIToken | None:
    """The active token matching ``raw`` (with its user loaded), or None.

    Records the use at most once per ``LAST_USED_PRECISION`` so that a busy script does
    not turn every request into a write.
    """
    raw = (raw or "").strip()
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    token = (
        APIToken.objects.select_related("user")
        .filter(token_hash=token_hash(raw), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_PRECISION:
        token.last_used_at = now
        APIToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


def token_authenticate(raw: str | None):
    """The user a raw bearer token belongs to, or None (wrong, revoked, inactive user)."""
    token = token_verify(raw)
    return token.user if token is not None else None
