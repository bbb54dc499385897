"""Sign-in against the team's LDAP directory, with django-auth-ldap.

The library binds as the user to check the password, maps the directory's attributes
onto the user and, with ``AGENTSITE_LDAP_REQUIRE_GROUP``, makes membership of that group
the ``is_active`` flag at each sign-in. This backend adds what both sign-in sources
share (:mod:`.identities`): the user tied to their directory name, groups in step with
the directory's, and sessions of a disabled user ending at their next request.

Imported only when LDAP is configured (``AGENTSITE_LDAP_SERVER_URI``): python-ldap is the
``ldap`` extra, compiled against Debian's libldap2-dev.
"""

from __future__ import annotations

import threading
from typing import Any

from django_auth_ldap.backend import LDAPBackend, ldap_error

from conversations.accounts import identities
from conversations.accounts.users import cached_user
from conversations.models import ExternalIdentity

__all__ = ["DirectoryBackend", "DirectoryUnreachable", "look_up"]

SOURCE = ExternalIdentity.Source.LDAP


class DirectoryUnreachable(RuntimeError):
    """The directory did not answer: nothing can be said about the user."""


class DirectoryBackend(LDAPBackend):
    """django-auth-ldap's backend, with the shared identity, groups and session rules."""

    def authenticate(
        self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> Any:
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            return None
        identity = identities.link(user, source=SOURCE, subject=user.get_username())
        if user.is_active:
            identity.disabled_at = None  # the directory's word (its is_active group) wins
            identity.save(update_fields=["disabled_at"])
        identities.sync_groups(identity, user.ldap_user.group_names)
        # The library returns a user its require-group made inactive; Django's login form
        # would refuse them, the API's and a script's authenticate() must too.
        return user if user.is_active else None

    def get_user(self, user_id: Any) -> Any:
        """Each request's user, through the cache, and only while active (the library's
        own lets a disabled user's session go on)."""
        user = cached_user(user_id)
        return user if user is not None and user.is_active else None


_errors = threading.local()


def _note_error(sender: Any, context: str, exception: Exception, **kwargs: Any) -> None:
    noted = getattr(_errors, "noted", None)
    if noted is not None:
        noted.append(exception)


ldap_error.connect(_note_error, dispatch_uid="conversations.accounts.ldapauth")


def look_up(identity: ExternalIdentity) -> Any:
    """The user as the directory has them now (attributes, ``is_active`` and groups
    applied), or None if the directory no longer has them.

    Raises :class:`DirectoryUnreachable` when the directory did not answer: the library
    returns None for that too, and says which through its ``ldap_error`` signal.
    """
    _errors.noted = []
    try:
        backend = DirectoryBackend()
        user = backend.populate_user(identity.subject)
        errors = list(_errors.noted)
    finally:
        _errors.noted = None
    if errors:
        raise DirectoryUnreachable(str(errors[0]))
    if user is not None:
        identities.sync_groups(identity, user.ldap_user.group_names)
    return user
