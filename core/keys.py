"""Stored secrets that no configured key decrypts: found at start, cleared on request.

Secrets are encrypted under ``ENCRYPTION_KEYS`` or, without it, a key derived from
``SECRET_KEY`` (:mod:`core.crypto`). A changed or lost key leaves them unreadable: every
page that loads a provider would fail. Instead a server or worker refuses to start
saying which setting and what to do (:func:`core.checks.refuse_to_serve_misconfigured`),
``manage.py check`` reports it (agentsite.E003), and ``manage.py
forget_undecryptable_secrets`` clears them so an admin can enter them again.

Read and written as raw column values: the ORM decrypts an encrypted field on every read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.apps import apps
from django.conf import settings
from django.db import DatabaseError, connection, transaction

from core.crypto import EncryptedTextField, decrypt

__all__ = ["Unreadable", "encrypted_fields", "forget_undecryptable", "undecryptable_secrets"]


@dataclass(frozen=True)
class Unreadable:
    """One stored secret no configured key decrypts."""

    model: type
    field: EncryptedTextField
    pk: object

    def __str__(self) -> str:
        return f"{self.model._meta.label} #{self.pk} ({self.field.verbose_name})"


def encrypted_fields() -> list[tuple[type, list[EncryptedTextField]]]:
    """(model, its encrypted fields) for every concrete, managed installed model."""
    found = []
    for model in apps.get_models():
        if model._meta.proxy or not model._meta.managed:
            continue
        fields = [
            f
            for f in model._meta.concrete_fields
            if isinstance(f, EncryptedTextField) and f.model is model
        ]
        if fields:
            found.append((model, fields))
    return found


def undecryptable_secrets() -> list[Unreadable]:
    """Every stored secret no configured key decrypts (tables not migrated yet: none)."""
    found: list[Unreadable] = []
    quote = connection.ops.quote_name
    for model, fields in encrypted_fields():
        table, pk_column = quote(model._meta.db_table), quote(model._meta.pk.column)
        for field in fields:
            column = quote(field.column)
            try:
                with connection.cursor() as cursor:
                    cursor.execute(
                        f"SELECT {pk_column}, {column} FROM {table} WHERE {column} <> ''"
                    )
                    rows = cursor.fetchall()
            except DatabaseError:  # not migrated yet: nothing stored
                continue
            for pk, token in rows:
                try:
                    decrypt(token)
                except ValueError:
                    found.append(Unreadable(model, field, pk))
    return found


def forget_undecryptable() -> list[Unreadable]:
    """Empty every stored secret no configured key decrypts; what was emptied."""
    found = undecryptable_secrets()
    quote = connection.ops.quote_name
    with transaction.atomic(), connection.cursor() as cursor:
        for item in found:
            table, pk_column = quote(item.model._meta.db_table), quote(item.model._meta.pk.column)
            column = quote(item.field.column)
            cursor.execute(f"UPDATE {table} SET {column} = '' WHERE {pk_column} = %s", [item.pk])
    return found


def key_source() -> str:
    """The setting the encryption key comes from (never the key)."""
    if [key for key in settings.ENCRYPTION_KEYS if key.strip()]:
        return "ENCRYPTION_KEYS"
    return "SECRET_KEY"


def key_setting_words() -> str:
    """That setting as a message names it."""
    if key_source() == "SECRET_KEY":
        return "SECRET_KEY (ENCRYPTION_KEYS is empty: the key derives from it)"
    return "ENCRYPTION_KEYS"


def describe(found: Sequence[object], *, limit: int = 5) -> str:
    listed = ", ".join(str(item) for item in found[:limit])
    more = f" and {len(found) - limit} more" if len(found) > limit else ""
    return f"{listed}{more}"
