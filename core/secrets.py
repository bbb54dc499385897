"""Where the development SECRET_KEY comes from when none is configured.

A random key is generated once by ``manage.py prepare_instance`` (which ``make run``
runs) and kept in ``var/secret_key`` (mode 0600) so sessions survive restarts; the
settings only read it. It is marked with Django's ``django-insecure-`` prefix: the system
check in :mod:`core.checks` refuses to start with it when DEBUG is off, and refuses to
start without any key.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

DEV_SECRET_PREFIX = "django-insecure-"


def read_dev_secret(path: Path) -> str:
    """The generated key kept at ``path``; "" when there is none (nothing is written)."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def create_dev_secret(path: Path) -> bool:
    """Generate a key into ``path`` (0600) unless it holds one; whether it wrote one."""
    if read_dev_secret(path):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    key = DEV_SECRET_PREFIX + secrets.token_urlsafe(50)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return True


def is_dev_secret(key: str) -> bool:
    return not key or key.startswith(DEV_SECRET_PREFIX)
