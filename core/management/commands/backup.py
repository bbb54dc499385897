"""``manage.py backup PATH``: this instance's database and media files in one archive.

See :mod:`core.backup` for what the ``.tar.gz`` holds; secrets stay encrypted in it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.backup import BackupError, backup


class Command(BaseCommand):
    help = (
        "Write the database (dumpdata, secrets as encrypted tokens), the media root and a "
        "manifest into one .tar.gz (mode 0600)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="the archive to write, e.g. agentsite-backup.tar.gz")

    def handle(self, *args: Any, path: str, **options: Any) -> None:
        try:
            manifest = backup(Path(path))
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        rows = sum(manifest.counts.values())
        self.stdout.write(
            f"{path}: {rows} rows of {len(manifest.counts)} models, "
            f"{manifest.data['media_files']} media file(s); keep it as private as the "
            f"database, and keep {manifest.data['encryption_key_from']} apart from it."
        )
