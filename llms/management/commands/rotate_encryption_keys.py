"""``manage.py rotate_encryption_keys``: re-encrypt every secret under the primary key.

Generic over apps: every ``EncryptedTextField`` of every installed model is rewritten.
Procedure: put a new key first in ENCRYPTION_KEYS (keep the old ones after it), restart,
run this command, then drop the old keys. A value no configured key can decrypt is
reported and left untouched (the command then exits with an error).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction

from core.crypto import EncryptedTextField, decrypt, reset_cache, rotate
from core.keys import encrypted_fields

BATCH = 500


class Command(BaseCommand):
    help = "Re-encrypt all encrypted fields under the first key of ENCRYPTION_KEYS."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--check", action="store_true", help="only verify that every value decrypts"
        )

    def handle(self, *args: Any, check: bool = False, **options: Any) -> None:
        reset_cache()  # use the keys configured now
        failures = 0
        for model, fields in encrypted_fields():
            done, failed = self._process(model, fields, check=check)
            failures += failed
            names = ", ".join(f.name for f in fields)
            verb = "verified" if check else "re-encrypted"
            self.stdout.write(f"{model._meta.label} ({names}): {done} value(s) {verb}")
        if failures:
            raise CommandError(
                f"{failures} value(s) could not be decrypted with any configured key; "
                "add the missing key to ENCRYPTION_KEYS and run again."
            )

    def _process(self, model: type, fields: list[EncryptedTextField], *, check: bool) -> tuple:
        """Work on raw column values: plain SQL, because the ORM always decrypts an
        encrypted field on read and encrypts it on write."""
        table = connection.ops.quote_name(model._meta.db_table)
        pk = model._meta.pk
        pk_column = connection.ops.quote_name(pk.column)
        done = failed = 0
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {pk_column} FROM {table} ORDER BY {pk_column}")
            pks = [row[0] for row in cursor.fetchall()]
        for field in fields:
            column = connection.ops.quote_name(field.column)
            for start in range(0, len(pks), BATCH):
                batch = pks[start : start + BATCH]
                with transaction.atomic(), connection.cursor() as cursor:
                    marks = ", ".join(["%s"] * len(batch))
                    cursor.execute(
                        f"SELECT {pk_column}, {column} FROM {table} WHERE {pk_column} IN ({marks})",
                        batch,
                    )
                    for key, token in cursor.fetchall():
                        if not token:
                            continue
                        try:
                            decrypt(token)
                            new = token if check else rotate(token)
                        except ValueError:
                            failed += 1
                            self.stderr.write(
                                f"{model._meta.label} pk={key} {field.name}: cannot decrypt"
                            )
                            continue
                        if new != token:
                            cursor.execute(
                                f"UPDATE {table} SET {column} = %s WHERE {pk_column} = %s",
                                [new, key],
                            )
                        done += 1
        return done, failed
