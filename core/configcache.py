"""Per-process cache of the admin-managed configuration read on every message and run.

A run needs its model (with its provider) and the tool and MCP server rows its user may
use; a message checks its user's quota; a new conversation takes the default model.
Building those queries (group permissions, subqueries) costs more CPU than the rest of a
short run's set-up, for rows that change only when an admin edits them. Each process
keeps them in memory, stamped with :class:`~core.models.ConfigVersion`'s token, and reads
that one small row instead. Saving or deleting a watched row (providers, models, role
assignments, quotas, groups, who belongs to which group; the tools app watches its own)
replaces the token in the same transaction, so no process serves rows older than what it
can read. Entries also expire after ``MAX_AGE_SECONDS``, and at most ``MAX_ENTRIES`` are
kept.

Cached values are shared between runs and threads: callers must treat them as read-only.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from django.db.models import Model
from django.db.models.signals import m2m_changed, post_delete, post_save

from core.models import ConfigVersion

T = TypeVar("T")

MAX_AGE_SECONDS = 60.0
MAX_ENTRIES = 2048
SINGLETON_PK = 1


def current_token() -> str:
    """The configuration's current version token."""
    return (
        ConfigVersion.objects.filter(pk=SINGLETON_PK).values_list("token", flat=True).first() or ""
    )


def bump() -> None:
    """Give the configuration a new token (call inside the transaction that changed it)."""
    token = uuid.uuid4().hex
    if not ConfigVersion.objects.filter(pk=SINGLETON_PK).update(token=token):
        ConfigVersion.objects.update_or_create(pk=SINGLETON_PK, defaults={"token": token})


class VersionedCache:
    """Values built from configuration rows, valid while the token is unchanged."""

    def __init__(self, *, max_age: float = MAX_AGE_SECONDS, max_entries: int = MAX_ENTRIES):
        self.max_age = max_age
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, tuple[str, float, Any]] = OrderedDict()
        self._lock = threading.Lock()  # database threads share it

    def get(self, key: Hashable, token: str, build: Callable[[], T]) -> T:
        """The cached value for ``key`` under ``token``, or ``build()`` (then cached)."""
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] == token and now - entry[1] < self.max_age:
                self._entries.move_to_end(key)
                return entry[2]
        value = build()
        with self._lock:
            self._entries[key] = (token, now, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


config_cache = VersionedCache()


def cached(key: Hashable, build: Callable[[], T], *, token: str | None = None) -> T:
    """``build()``'s value for ``key``, cached while the configuration token is unchanged
    (pass ``token`` when the caller has just read it)."""
    return config_cache.get(key, current_token() if token is None else token, build)


def _bump_on_change(**kwargs: Any) -> None:
    if kwargs.get("raw") or kwargs.get("action", "post_").startswith("pre_"):
        return  # loaddata's own rows; m2m changes count once they are made
    bump()


def watch(*models: type[Model], links: tuple[Any, ...] = ()) -> None:
    """Replace the token whenever a row of ``models`` is saved or deleted, or a
    many-to-many table in ``links`` changes."""
    for model in models:
        uid = f"core.configcache.{model._meta.label}"
        post_save.connect(_bump_on_change, sender=model, dispatch_uid=f"{uid}.save")
        post_delete.connect(_bump_on_change, sender=model, dispatch_uid=f"{uid}.delete")
    for through in links:
        m2m_changed.connect(
            _bump_on_change, sender=through, dispatch_uid=f"core.configcache.{through}"
        )
