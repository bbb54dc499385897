"""Create this instance's private files: what importing the settings never does.

``make run`` and ``make migrate`` run it before ``migrate``; running it again changes
nothing but modes that were loosened (an existing install is tightened). It makes:

- ``AGENTSITE_VAR_DIR`` (default ``var/``), mode 0700;
- this instance's secret key ``var/secret_key`` (0600), unless ``SECRET_KEY`` is set in
  the environment; a key already there is kept (sessions survive);
- ``MEDIA_ROOT`` and ``STATIC_ROOT``, 0700;
- the SQLite database file (and its ``-wal``/``-shm``/``-journal``), 0600: created empty
  before ``migrate`` opens it, so SQLite gives its companions the same mode
  (core/filemodes.py). Other databases are left alone.

It runs without system checks: the check that refuses a missing key (agentsite.E002)
would refuse the command that makes it.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from core.filemodes import private_dir, private_file, private_sqlite
from core.secrets import create_instance_secret


class Command(BaseCommand):
    help = (
        "Create var/ (0700), this instance's secret key (0600, unless SECRET_KEY is set), "
        "the media and static folders and the SQLite file (0600). Idempotent."
    )
    requires_system_checks: list[str] = []

    def handle(self, *args, verbosity: int, **options) -> None:
        made: list[str] = []
        for directory in (Path(settings.VAR_DIR), Path(settings.MEDIA_ROOT)):
            made += self._directory(directory)
        key_file = settings.AGENTSITE_SECRET_KEY_FILE
        if key_file is not None:  # in AGENTSITE_VAR_DIR
            private_file(Path(key_file))  # tightened before a key is written into it
            if create_instance_secret(Path(key_file)):
                made.append(f"{key_file} (a new SECRET_KEY for this instance)")
        made += self._directory(Path(settings.STATIC_ROOT))
        database = settings.DATABASES["default"]
        if database["ENGINE"] == "django.db.backends.sqlite3":
            name = os.fspath(database["NAME"])
            existed = os.path.exists(name)
            private_sqlite(name)
            if not existed and os.path.exists(name):
                made.append(f"{name} (empty, for migrate)")
        if verbosity:
            for line in made:
                self.stdout.write(f"created {line}")
            self.stdout.write(f"instance ready in {settings.VAR_DIR} (private: 0700/0600)")

    @staticmethod
    def _directory(path: Path) -> list[str]:
        existed = path.is_dir()
        private_dir(path)
        return [] if existed else [f"{path}/"]
