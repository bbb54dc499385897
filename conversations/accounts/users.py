"""Signed-in users read from the cache instead of the database on every request.

Django loads the session's user with one query per request and per websocket connect,
on the path of every message's first token. The row changes rarely, so this
authentication backend keeps it in the cache (Zulip caches its user profiles the same
way) and every save or delete of a user drops the entry at once: deactivating a user,
changing their password (which ends their other sessions) or their staff flags takes
effect on the next request. In team mode the cache is Redis, shared by every process; in
embedded mode it is per process, so a change made by another process (a management
command) is seen after ``USER_CACHE_SECONDS``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache
from django.db.models.signals import post_delete, post_save
from redis.exceptions import RedisError

from core.episodes import OutageLog

cache_unreachable = OutageLog("the user cache")

USER_CACHE_SECONDS = 60


def user_cache_key(user_id: Any) -> str:
    return f"conversations:auth-user:{user_id}"


def cached_user(user_id: Any) -> Any:
    """The user with this id, from the cache or else the database; None if there is none."""
    key = user_cache_key(user_id)
    try:
        user = cache.get(key)
    except RedisError as exc:  # read from the database meanwhile; logged once per outage
        cache_unreachable.failed(exc, doing=f"reading user {user_id}")
        return _from_database(user_id)
    cache_unreachable.recovered()
    if user is None:
        user = _from_database(user_id)
        if user is not None:
            try:
                cache.set(key, user, USER_CACHE_SECONDS)
            except RedisError as exc:
                cache_unreachable.failed(exc, doing=f"caching user {user_id}")
    return user


def _from_database(user_id: Any) -> Any:
    try:
        return get_user_model()._default_manager.get(pk=user_id)
    except get_user_model().DoesNotExist:
        return None


class CachedUserBackend(ModelBackend):
    """:class:`ModelBackend` whose ``get_user`` (each request's) reads through the cache."""

    def get_user(self, user_id: Any) -> Any:
        user = cached_user(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None


def forget_user(instance: Any, **_kwargs: Any) -> None:
    cache.delete(user_cache_key(instance.pk))


def connect_signals() -> None:
    """Drop a user's cached row whenever it is saved or deleted (any field may matter)."""
    user_model = get_user_model()
    post_save.connect(
        forget_user, sender=user_model, dispatch_uid="conversations.accounts.users.save"
    )
    post_delete.connect(
        forget_user, sender=user_model, dispatch_uid="conversations.accounts.users.delete"
    )
