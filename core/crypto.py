"""Encryption at rest for secrets (provider API keys, tool and MCP credentials).

Fernet (AES-128-CBC + HMAC, from the ``cryptography`` package) with key rotation through
``MultiFernet``: ``ENCRYPTION_KEYS`` is a comma-separated list, the first key encrypts and
every key decrypts. Without it a key is derived from SECRET_KEY, so a fresh install works;
set ENCRYPTION_KEYS before production so rotating SECRET_KEY does not orphan secrets.
Rotation: prepend a new key, run ``manage.py rotate_encryption_keys``, drop the old key.

Backups: ``manage.py dumpdata`` writes an encrypted field as a token (Django's
``value_to_string`` serialization hook), never as plaintext, and ``loaddata`` turns the
token back into the value (``to_python``), to be stored encrypted again. Restoring needs a
key that decrypts the tokens: the same ``ENCRYPTION_KEYS`` (or ``SECRET_KEY``, when the
key derives from it).
"""

from __future__ import annotations

import base64
import functools
import hashlib
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

__all__ = ["EncryptedTextField", "decrypt", "encrypt", "generate_key", "reset_cache", "rotate"]

PREFIX = "fernet:"


def generate_key() -> str:
    return Fernet.generate_key().decode()


def _derived_key(secret: str) -> bytes:
    digest = hashlib.sha256(("agentsite-encryption:" + secret).encode()).digest()
    return base64.urlsafe_b64encode(digest)


@functools.cache
def _fernet() -> MultiFernet:
    keys = [k.strip() for k in settings.ENCRYPTION_KEYS if k.strip()]
    fernets = [Fernet(k.encode()) for k in keys] or [Fernet(_derived_key(settings.SECRET_KEY))]
    return MultiFernet(fernets)


def reset_cache() -> None:
    """Forget the cached keys (after settings change, e.g. in tests)."""
    _fernet.cache_clear()


def encrypt(plaintext: str) -> str:
    return PREFIX + _fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    if not token.startswith(PREFIX):
        raise ValueError("value is not an agentsite-encrypted token")
    try:
        return _fernet().decrypt(token[len(PREFIX) :].encode()).decode()
    except InvalidToken as exc:
        raise ValueError("cannot decrypt: no configured key matches (ENCRYPTION_KEYS)") from exc


def rotate(token: str) -> str:
    """Re-encrypt ``token`` under the primary key."""
    return PREFIX + _fernet().rotate(token[len(PREFIX) :].encode()).decode()


class EncryptedTextField(models.TextField):
    """A TextField stored as a Fernet token; Python code only ever sees plaintext.

    Serialized (dumpdata, fixtures) as a token too: a backup file holds no secret.
    """

    def from_db_value(self, value, expression, connection):
        if value in (None, ""):
            return value
        return decrypt(value)

    def get_prep_value(self, value: Any) -> str | None:
        # Not through to_python, which decrypts tokens: a token given as the value is
        # stored as that text (see clean()).
        value = _as_text(value)
        if value in (None, ""):
            return value
        return encrypt(value)

    def value_to_string(self, obj: models.Model) -> str:
        """The serialized form (dumpdata): a token under the primary key, not plaintext."""
        value = self.value_from_object(obj)
        return encrypt(value) if value else ""

    def to_python(self, value: Any) -> str | None:
        """A serialized token (loaddata) back to its plaintext; other values unchanged."""
        value = super().to_python(value)
        if isinstance(value, str) and value.startswith(PREFIX):
            try:
                return decrypt(value)
            except ValueError as exc:
                raise ValidationError(str(exc), code="undecryptable") from exc
        return value

    def clean(self, value: Any, model_instance: models.Model | None) -> str | None:
        """Model validation keeps the value as given: only fixtures decrypt tokens.

        Otherwise ``full_clean`` would decrypt a token pasted into a form or a command,
        and someone holding a stolen backup, but not the key, could have a secret sent to
        a server of their choosing.
        """
        value = _as_text(value)
        self.validate(value, model_instance)
        self.run_validators(value)
        return value


def _as_text(value: Any) -> str | None:
    """A value as TextField stores it: None or a string (lazy strings resolved)."""
    return value if value is None or isinstance(value, str) else str(value)
