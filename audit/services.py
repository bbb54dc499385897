"""Recording audit events, and what they say about an object's fields.

``record`` is the one writer of :class:`audit.models.AuditEvent`. Services of the layers
above call it with the actor they know; the admin records through
:class:`audit.adminmixin.AuditedAdminMixin`; sign-ins and group membership through the
receivers of :mod:`audit.receivers`.

Secrets never reach a row: an encrypted field (``core.crypto.EncryptedTextField``), a field
or JSON key whose name has a part such as ``key``, ``secret``, ``token``, ``password`` or
``headers``, shows as ``"***"`` (an empty value stays empty, so "set" and "cleared" still
show).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import models
from django.http import HttpRequest
from django.utils.module_loading import import_string

from audit.models import AuditEvent
from core import logcontext
from core.crypto import EncryptedTextField

__all__ = [
    "MASK",
    "Client",
    "acting",
    "client_of",
    "current_client",
    "diff",
    "is_secret_name",
    "mask_value",
    "record",
    "snapshot",
    "target_name",
]

MASK = "***"
# Name parts (split on "_", "-" and case changes) that make a field or JSON key a secret.
SECRET_PARTS = frozenset(
    {
        "key",
        "apikey",
        "secret",
        "secrets",
        "token",
        "password",
        "passwd",
        "passphrase",
        "header",
        "headers",
        "credential",
        "credentials",
        "authorization",
        "cookie",
        "env",
    }
)
# Short names of the audited models in action names ("provider.changed").
TARGET_NAMES = {
    "llms.provider": "provider",
    "llms.llmmodel": "model",
    "llms.roleassignment": "role",
    "tools.toolconfig": "tool",
    "tools.mcpserver": "mcp",
    "auth.group": "group",
    "auth.user": "user",
}


@dataclass(frozen=True)
class Client:
    """Where a request came from: the client's address and the proxy's request id."""

    address: str = ""
    request_id: str = ""


def client_of(request: HttpRequest | None) -> Client:
    """The client of ``request``: its address as the site trusts it (the callable the login
    lock-out counts by, ``AXES_CLIENT_IP_CALLABLE``, which knows the trusted proxies) and
    its request id (core/logcontext.py's: the trusted proxy's X-Request-ID or a fresh one;
    never a header as a client sent it)."""
    if request is None:
        return Client()
    address = import_string(settings.AXES_CLIENT_IP_CALLABLE)(request)
    request_id = getattr(request, "request_id", "") or ""
    return Client(address=str(address or "")[:45], request_id=str(request_id)[:100])


# Who is acting, and from where, while the admin handles a request: receivers of model
# signals (group membership) read it; None outside such a request.
_acting: ContextVar[tuple[Any, Client] | None] = ContextVar("audit_acting", default=None)


@contextmanager
def acting(request: HttpRequest) -> Iterator[None]:
    user = getattr(request, "user", None)
    token = _acting.set((user if user and user.is_authenticated else None, client_of(request)))
    try:
        yield
    finally:
        _acting.reset(token)


def current_client() -> tuple[Any, Client]:
    """The actor and client set by :func:`acting`, or ``(None, Client())``."""
    return _acting.get() or (None, Client())


def target_name(model: type[models.Model] | models.Model) -> str:
    """The short name of a model in action names (``provider``, ``model``, ``mcp``)."""
    return TARGET_NAMES.get(model._meta.label_lower, model._meta.model_name)


def is_secret_name(name: str) -> bool:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(name))
    parts = {part for part in re.split(r"[^a-z0-9]+", spaced.lower()) if part}
    return bool(parts & SECRET_PARTS) or "apikey" in spaced.lower().replace("_", "")


def mask_value(value: Any) -> Any:
    """A secret's value as the log shows it: empty stays empty, anything else ``***``."""
    if isinstance(value, Secret):
        return MASK
    return value if value in (None, "", {}, []) else MASK


class Secret:
    """A secret value in a snapshot: compared by value (so a changed key shows as a
    change), shown and stored as ``***`` only. It lives in memory during one save."""

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        self._value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(repr(self._value))

    def __repr__(self) -> str:
        return MASK

    __str__ = __repr__


def _secret(value: Any) -> Any:
    return value if value in (None, "", {}, []) else Secret(value)


def _wrap(value: Any) -> Any:
    """A value with the JSON keys that name secrets wrapped as :class:`Secret`."""
    if isinstance(value, dict):
        return {
            str(k): _secret(v) if is_secret_name(str(k)) else _wrap(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_wrap(v) for v in value]
    return value


def _clean(value: Any) -> Any:
    """A value for the log: secrets and nested JSON keys that name secrets masked."""
    if isinstance(value, Secret):
        return MASK
    if isinstance(value, dict):
        return {
            str(k): mask_value(v) if is_secret_name(str(k)) else _clean(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def snapshot(obj: models.Model | None, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """The editable fields of ``obj`` (a foreign key and a many-to-many as their rows'
    labels), secrets wrapped as :class:`Secret`: compare two with :func:`diff`. Empty for
    None."""
    if obj is None:
        return {}
    out: dict[str, Any] = {}
    for field in obj._meta.concrete_fields:
        if not field.editable or field.primary_key or field.name in exclude:
            continue
        if field.is_relation:
            related = getattr(obj, field.name, None)
            value = str(related) if related is not None else None
        else:
            value = field.value_from_object(obj)
        if isinstance(field, EncryptedTextField) or is_secret_name(field.name):
            out[field.name] = _secret(value)
        else:
            out[field.name] = _wrap(value)
    if obj.pk is not None:
        for field in obj._meta.many_to_many:
            if field.name not in exclude:
                out[field.name] = sorted(str(row) for row in getattr(obj, field.name).all())
    return out


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    """``{field: [before, after]}`` for the fields whose value differs, secrets masked."""
    keys = [*before, *(k for k in after if k not in before)]
    return {
        key: [_clean(before.get(key)), _clean(after.get(key))]
        for key in keys
        if before.get(key) != after.get(key)
    }


def _label(obj: Any) -> str:
    return str(obj)[:300]


def record(
    action: str,
    *,
    actor: Any = None,
    actor_name: str | None = None,
    target: models.Model | None = None,
    target_type: str = "",
    target_id: Any = "",
    target_label: str = "",
    changes: dict[str, Any] | None = None,
    client: Client | None = None,
    request: HttpRequest | None = None,
) -> AuditEvent:
    """Append one event. ``actor`` is a user (or None: the system, or an anonymous client
    named by ``actor_name``); ``target`` a row (or its type, id and label given apart);
    ``changes`` ``{field: [before, after]}``, masked again here; ``client`` or ``request``
    say where it came from."""
    if client is None:
        client = client_of(request) if request is not None else current_client()[1]
    if not client.request_id:  # a service called without the request: the logs' id
        client = Client(client.address, str(logcontext.current().get("request_id") or "")[:100])
    if actor is not None and not getattr(actor, "is_authenticated", False):
        actor = None  # AnonymousUser
    if actor_name is None:
        actor_name = actor.get_username() if actor is not None else ""
    if target is not None:
        target_type = target_type or target._meta.label_lower
        target_id = target_id or target.pk
        target_label = target_label or _label(target)
    masked = {
        field: [mask_value(v) for v in pair] if is_secret_name(field) else _clean(pair)
        for field, pair in (changes or {}).items()
    }
    return AuditEvent.objects.create(
        actor=actor,
        actor_name=str(actor_name)[:150],
        action=action,
        target_type=target_type,
        target_id="" if target_id is None else str(target_id)[:64],
        target_label=str(target_label)[:300],
        changes=masked,
        address=client.address,
        request_id=client.request_id,
    )
