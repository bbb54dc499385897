"""Encryption at rest for secrets (provider API keys, tool and MCP credentials).

Fernet (AES-128-CBC + HMAC, from the ``cryptography`` package) with key rotation through
``MultiFernet``: ``ENCRYPTION_KEYS`` is a comma-separated list, the first key encrypts and
every key decrypts. Without it a key is derived from SECRET_KEY, so a fresh install works;
set ENCRYPTION_KEYS before production so rotating SECRET_KEY does not orphan secrets.
Rotation: prepend a new key, run ``manage.py rotate_encryption_keys``, drop the old key.
"""

from __future__ import annotations

import base64
import functools
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
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
    keys = [k.strip() for k in getattr(settings, "ENCRYPTION_KEYS", []) if k.strip()]
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
    """A TextField stored as a Fernet token; Python code only ever sees plaintext."""

    def from_db_value(self, value, expression, connection):
        if value in (None, ""):
            return value
        return decrypt(value)

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        if value in (None, ""):
            return value
        return encrypt(value)
