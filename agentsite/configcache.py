"""Per-process cache of the admin-managed configuration read on every message and run.

A run needs its model (with the provider) and the tool and MCP server rows its user may
use: four queries with permission subqueries, about a quarter of a short run's server
CPU, for rows that change only when an admin edits them; so do a message's quota limit
and a new conversation's default model. Each process keeps them in memory, stamped with
:class:`~agentsite.models.ConfigVersion`'s token, and reads that one small row instead.
Saving or deleting a provider, model, tool configuration, MCP server, quota or group, or
changing who belongs to which group, replaces the token inside the same transaction
(signal handlers below), so no process serves rows older than what it can read. Entries
also expire after ``MAX_AGE_SECONDS`` and the cache holds at most ``MAX_ENTRIES`` (least
recently used go first).

Cached values are shared between runs and threads: callers must treat them as read-only.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from django.db import connection
from django.db.models.signals import m2m_changed, post_delete, post_save

T = TypeVar("T")

MAX_AGE_SECONDS = 60.0
MAX_ENTRIES = 2048
SINGLETON_PK = 1


def current_token() -> str:
    """The configuration's current version token (one primary-key read, in plain SQL: it is
    read on every run start and message, and the ORM's query building cost more than it)."""
    from agentsite.models import ConfigVersion

    with connection.cursor() as cursor:
        table = ConfigVersion._meta.db_table
        cursor.execute(f"SELECT token FROM {table} WHERE id = %s", [SINGLETON_PK])
        row = cursor.fetchone()
    return row[0] if row else ""


def bump() -> None:
    """Give the configuration a new token (call inside the transaction that changed it)."""
    from agentsite.models import ConfigVersion

    token = uuid.uuid4().hex
    if not ConfigVersion.objects.filter(pk=SINGLETON_PK).update(token=token):
        ConfigVersion.objects.update_or_create(pk=SINGLETON_PK, defaults={"token": token})


class VersionedCache:
    """Values built from configuration rows, valid while the token is unchanged."""

    def __init__(self, *, max_age: float = MAX_AGE_SECONDS, max_entries: int = MAX_ENTRIES):
        self.max_age = max_age
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, tuple[str, float, Any]] = OrderedDict()
        self._lock = threading.Lock()  # ORM threads share it

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


def cached(key: Hashable, build: Callable[[], T]) -> T:
    """``build()``'s value for ``key``, cached while the configuration token is unchanged."""
    return config_cache.get(key, current_token(), build)


def _bump_on_change(**kwargs: Any) -> None:
    if kwargs.get("raw") or kwargs.get("action", "post_").startswith("pre_"):
        return  # loaddata's own rows; m2m changes count once they are made
    bump()


def connect_signals() -> None:
    """Replace the token whenever something a run's configuration depends on changes."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from llms.models import LLMModel, Provider, UsageQuota
    from tools.models import MCPServer, ToolConfig

    for model in (Provider, LLMModel, ToolConfig, MCPServer, UsageQuota, Group):
        uid = f"agentsite.configcache.{model._meta.label}"
        post_save.connect(_bump_on_change, sender=model, dispatch_uid=f"{uid}.save")
        post_delete.connect(_bump_on_change, sender=model, dispatch_uid=f"{uid}.delete")
    links = [m.allowed_groups.through for m in (LLMModel, ToolConfig, MCPServer)]
    for through in (*links, get_user_model().groups.through):
        m2m_changed.connect(
            _bump_on_change, sender=through, dispatch_uid=f"agentsite.configcache.{through}"
        )
