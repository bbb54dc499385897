"""Users who sign in through the team's identity provider (OIDC) or directory (LDAP).

Both sources end here: the user is found by the provider's subject, created on first
sight, and their groups follow the provider's list at each sign-in. Groups are the ones
that already gate models, tools and MCP servers; one missing is created. Only groups the
provider gave at an earlier sign-in are taken away when it stops listing them: a group
an admin gave by hand stays.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from audit.services import record
from conversations.models import ExternalIdentity

__all__ = [
    "GROUP_NAME_MAX",
    "clean_group_names",
    "deactivate",
    "identity_of",
    "link",
    "reactivate",
    "sync_groups",
    "unique_username",
]

GROUP_NAME_MAX = Group._meta.get_field("name").max_length or 150
USERNAME_MAX = get_user_model()._meta.get_field("username").max_length or 150
USERNAME_CHARS = re.compile(r"[^\w.@+-]")


def identity_of(user: Any, source: str | None = None) -> ExternalIdentity | None:
    """The user's external identity (of ``source``, or any), or None for a local user."""
    identities = ExternalIdentity.objects.filter(user=user)
    if source is not None:
        identities = identities.filter(source=source)
    return identities.order_by("pk").first()


def unique_username(wanted: str) -> str:
    """A free username close to ``wanted`` (Django's username characters, then a number)."""
    base = USERNAME_CHARS.sub("", wanted)[: USERNAME_MAX - 6] or "user"
    users = get_user_model()._default_manager
    candidate, number = base, 1
    while users.filter(username__iexact=candidate).exists():
        number += 1
        candidate = f"{base}{number}"
    return candidate


def link(user: Any, *, source: str, subject: str) -> ExternalIdentity:
    """The identity row tying ``subject`` at ``source`` to ``user`` (made once)."""
    identity, _ = ExternalIdentity.objects.get_or_create(
        source=source, subject=subject, defaults={"user": user}
    )
    return identity


def clean_group_names(names: Iterable[Any]) -> list[str]:
    """Group names as a provider sends them: strings, trimmed, without duplicates.

    A path-style name (Keycloak's ``/team/eng``) keeps its slashes; a name longer than a
    Django group's name is dropped rather than cut, so two long names never merge."""
    seen: dict[str, None] = {}
    for name in names:
        if isinstance(name, str):
            name = name.strip()
            if name and len(name) <= GROUP_NAME_MAX:
                seen[name] = None
    return list(seen)


@transaction.atomic
def sync_groups(identity: ExternalIdentity, names: Iterable[Any]) -> tuple[list[str], list[str]]:
    """Make the user's provider-given groups ``names``; returns (joined, left).

    Each change is audited twice over: a ``group.joined``/``group.left`` per group (the
    membership receivers) and one ``sso.groups_changed`` naming the source."""
    wanted = clean_group_names(names)
    user = identity.user
    before = set(identity.groups)
    current = set(user.groups.values_list("name", flat=True))
    joined = [name for name in wanted if name not in current]
    left = sorted((before - set(wanted)) & current)
    if joined:
        groups = [Group.objects.get_or_create(name=name)[0] for name in joined]
        user.groups.add(*groups)
    if left:
        user.groups.remove(*Group.objects.filter(name__in=left))
    if joined or left:
        record(
            "sso.groups_changed",
            actor_name=f"{identity.source} sign-in",
            target=user,
            changes={"groups": [sorted(before & current), sorted(wanted)]},
        )
    identity.groups = sorted(wanted)
    identity.checked_at = timezone.now()
    identity.save(update_fields=["groups", "checked_at"])
    return joined, left


def deactivate(identity: ExternalIdentity, *, reason: str) -> None:
    """The provider no longer lets this user in: so neither does the site, over any
    channel (sessions, API tokens, websockets all require an active user)."""
    user = identity.user
    if not user.is_active:
        return
    user.is_active = False
    user.save(update_fields=["is_active"])
    identity.disabled_at = timezone.now()
    identity.save(update_fields=["disabled_at"])
    record(
        "sso.user_disabled",
        actor_name=f"{identity.source} sign-in",
        target=user,
        changes={"is_active": [True, False], "reason": [None, reason]},
    )


def reactivate(identity: ExternalIdentity) -> bool:
    """The provider let the user in again: undo :func:`deactivate` (only its own doing:
    a user an admin disabled stays disabled). True if the user may sign in."""
    user = identity.user
    if user.is_active:
        return True
    if identity.disabled_at is None:
        return False
    user.is_active = True
    user.save(update_fields=["is_active"])
    identity.disabled_at = None
    identity.save(update_fields=["disabled_at"])
    record(
        "sso.user_enabled",
        actor_name=f"{identity.source} sign-in",
        target=user,
        changes={"is_active": [False, True]},
    )
    return True
