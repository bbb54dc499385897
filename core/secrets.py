"""Where the development SECRET_KEY comes from when none is configured.

A random key is generated once and kept in ``var/secret_key`` (mode 0600) so sessions
survive restarts. It is marked with Django's ``django-insecure-`` prefix: the system check
in :mod:`core.checks` refuses to start with it when DEBUG is off.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

DEV_SECRET_PREFIX = "django-insecure-"


def load_or_create_dev_secret(path: Path) -> str:
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = DEV_SECRET_PREFIX + secrets.token_urlsafe(50)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key


def is_dev_secret(key: str) -> bool:
    return not key or key.startswith(DEV_SECRET_PREFIX)
