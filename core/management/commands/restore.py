"""``manage.py restore PATH``: load a ``manage.py backup`` archive into a new instance.

Into an empty, migrated database only; everything is checked before the transaction
commits (see :mod:`core.backup`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.backup import BackupError, restore


class Command(BaseCommand):
    help = (
        "Restore a backup made by `manage.py backup` into an empty, migrated database and "
        "the media root, checking the rows per model and that every secret decrypts."
    )
    # The key check (agentsite.E003) reads the database, which is empty here; the restore
    # checks the backup's secrets against the configured keys itself.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="the archive written by `manage.py backup`")

    def handle(self, *args: Any, path: str, **options: Any) -> None:
        try:
            manifest = restore(Path(path))
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        rows = sum(manifest.counts.values())
        self.stdout.write(
            f"restored {rows} rows of {len(manifest.counts)} models and "
            f"{manifest.data['media_files']} media file(s) from a backup of "
            f"{manifest.data['created_at']} ({manifest.data['database_engine']})."
        )
