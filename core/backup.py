"""One-file backups of an instance and their restore (``manage.py backup`` / ``restore``).

A backup is a single ``.tar.gz`` (mode 0600): one file to copy off the machine and keep
private, written to a temporary name and renamed, so a half-written backup never looks
like a whole one. It holds:

- ``manifest.json``: the format, agentsite's and Django's versions, when, the database
  engine, where the encryption key came from (``ENCRYPTION_KEYS`` or derived from
  ``SECRET_KEY``, never a key) and the rows per model;
- ``data.json``: what Django's ``dumpdata`` writes for every app (but times to the
  microsecond: Django's JSON encoder keeps milliseconds), with natural foreign keys (the
  content types and permissions they point to are made again by ``migrate``, with other
  ids) but the primary keys kept (audit events and event logs name rows by id); content
  types, permissions and sessions (live logins) left out. Encrypted fields are written
  as Fernet tokens (:meth:`core.crypto.EncryptedTextField.value_to_string`), never in
  plain text;
- ``media/``: the media root (``MEDIA_ROOT``: the artifacts' files).

The restore goes into an empty database migrated as the backup's was (it refuses one
holding users or conversations, or with other migrations applied): it first checks that
the configured keys decrypt every secret of the dump, then loads it in one transaction
with ``loaddata`` (which saves with ``raw=True`` through ``save_base``, so the audit
log's append-only ``save()`` is not in the way, and resets the sequences of the tables it
loaded), compares the rows per model with the manifest, checks every stored secret
decrypts (:func:`core.keys.undecryptable_secrets`) and puts the media files back; any
failure rolls everything back.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import tarfile
import tempfile
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time
from importlib import metadata
from pathlib import Path
from typing import Any

import django
from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import serializers
from django.core.management import call_command
from django.core.serializers.base import DeserializationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, router, transaction
from django.db.migrations.recorder import MigrationRecorder
from django.db.models import Model

from core.crypto import decrypt, reset_cache
from core.keys import (
    describe,
    encrypted_fields,
    key_setting_words,
    key_source,
    undecryptable_secrets,
)
from core.loading import restoring

__all__ = ["EXCLUDED", "BackupError", "Manifest", "backup", "restore"]

FORMAT = 1
MANIFEST = "manifest.json"
DATA = "data.json"
MEDIA = "media"
# Made again by ``migrate`` (content types, permissions), or live logins (sessions).
EXCLUDED = ("contenttypes", "auth.permission", "sessions")


class BackupError(Exception):
    """A backup that cannot be written, or read back into this instance."""


@dataclass(frozen=True)
class Manifest:
    data: dict[str, Any]

    @property
    def counts(self) -> dict[str, int]:
        return self.data["counts"]


def _version() -> str:
    try:
        return metadata.version("agentsite")
    except metadata.PackageNotFoundError:
        return "unknown"


# -- backup -------------------------------------------------------------------------------


def backup(path: Path, *, database: str = DEFAULT_DB_ALIAS) -> Manifest:
    """Write the archive at ``path`` (never over an existing file); its manifest."""
    path = Path(path)
    if path.exists():
        raise BackupError(
            f"{path} exists already: name a new file (a backup is never overwritten)."
        )
    reset_cache()  # the keys configured now
    with tempfile.TemporaryDirectory(prefix="agentsite-backup-") as work:
        dump = Path(work) / DATA
        with transaction.atomic(using=database):
            # One snapshot of every table, however busy the instance (SQLite: the read
            # transaction's; PostgreSQL: asked for, READ COMMITTED reads each query anew).
            if connections[database].vendor == "postgresql":
                with connections[database].cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            counts = _dump(dump, database)
            migrations = _applied_migrations(database)
        media_root = Path(settings.MEDIA_ROOT)
        media_files = (
            sorted(p for p in media_root.rglob("*") if p.is_file()) if media_root.is_dir() else []
        )
        manifest = Manifest(
            {
                "format": FORMAT,
                "agentsite": _version(),
                "django": django.get_version(),
                "created_at": datetime.now(UTC).isoformat(),
                "database_engine": connections[database].vendor,
                "encryption_key_from": key_source(),
                "counts": dict(sorted(counts.items())),
                "migrations": migrations,
                "media_files": len(media_files),
            }
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
                _add_bytes(tar, MANIFEST, json.dumps(manifest.data, indent=2).encode())
                tar.add(dump, arcname=DATA)
                for file in media_files:
                    tar.add(file, arcname=f"{MEDIA}/{file.relative_to(media_root).as_posix()}")
            os.replace(partial, path)
        except BaseException:
            with contextlib.suppress(OSError):
                partial.unlink()
            raise
    return manifest


def _applied_migrations(database: str) -> dict[str, list[str]]:
    """The migrations applied, per app: the tables the dump fits."""
    applied: dict[str, list[str]] = {}
    for app_label, name in sorted(MigrationRecorder(connections[database]).applied_migrations()):
        applied.setdefault(app_label, []).append(name)
    return applied


def _add_bytes(tar: tarfile.TarFile, name: str, content: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(content)
    info.mode = 0o600
    info.mtime = int(datetime.now(UTC).timestamp())
    tar.addfile(info, io.BytesIO(content))


class ExactJSONEncoder(DjangoJSONEncoder):
    """Django's encoder, keeping the microseconds of times (it cuts them to milliseconds):
    a restored row keeps its exact time, and rows ordered by time keep their order."""

    def default(self, o: Any) -> Any:
        if isinstance(o, datetime | time):
            return o.isoformat()
        return super().default(o)


def _dump(path: Path, database: str) -> Counter[str]:
    """``dumpdata`` of every app but :data:`EXCLUDED`, with natural foreign keys, every
    row (base managers), ordered by primary key, to ``path``; the rows per model.

    The serializing of ``dumpdata`` (its models in dependency order), through
    :func:`django.core.serializers.serialize` so the JSON encoder can be given.
    """
    excluded_apps = {label for label in EXCLUDED if "." not in label}
    excluded_models = {apps.get_model(label) for label in EXCLUDED if "." in label}
    app_list = {
        config: None
        for config in apps.get_app_configs()
        if config.models_module is not None and config.label not in excluded_apps
    }
    counts: Counter[str] = Counter()

    def objects() -> Iterator[Model]:
        for model in serializers.sort_dependencies(app_list.items(), allow_cycles=True):
            if model in excluded_models or model._meta.proxy:
                continue
            if not router.allow_migrate_model(database, model):
                continue
            queryset = model._base_manager.using(database).order_by(model._meta.pk.name)
            for obj in queryset.iterator():
                counts[model._meta.label_lower] += 1
                yield obj

    with path.open("w", encoding="utf-8") as stream:
        serializers.serialize(
            "json",
            objects(),
            stream=stream,
            use_natural_foreign_keys=True,
            cls=ExactJSONEncoder,
        )
    return counts


# -- restore ------------------------------------------------------------------------------


def restore(path: Path, *, database: str = DEFAULT_DB_ALIAS) -> Manifest:
    """Load the archive at ``path`` into this instance's empty database and media root."""
    path = Path(path)
    reset_cache()  # the keys configured now
    if not path.is_file():
        raise BackupError(f"{path}: no such backup file")
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            return _restore(tar, path, database)
    except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise BackupError(
            f"{path}: not a backup, or damaged ({exc}). Nothing was restored."
        ) from exc


def _restore(tar: tarfile.TarFile, path: Path, database: str) -> Manifest:
    with tempfile.TemporaryDirectory(prefix="agentsite-restore-") as work:
        names = set(tar.getnames())
        if MANIFEST not in names or DATA not in names:
            raise BackupError(f"{path}: not an agentsite backup (no {MANIFEST} or {DATA})")
        manifest = Manifest(json.loads(_read(tar, MANIFEST)))
        if manifest.data.get("format") != FORMAT:
            raise BackupError(f"{path}: backup format {manifest.data.get('format')!r} unknown")
        _refuse_other_schema(manifest, database)  # first: an unmigrated one has no tables
        _refuse_populated(database)
        dump = Path(work) / DATA
        dump.write_bytes(_read(tar, DATA))
        rows = json.loads(dump.read_text(encoding="utf-8"))
        _refuse_undecryptable(rows)  # before anything is written
        media = [m for m in tar.getmembers() if m.name.startswith(f"{MEDIA}/") and m.isfile()]
        written: list[Path] = []
        try:
            with transaction.atomic(using=database):
                with restoring():
                    try:
                        call_command("loaddata", str(dump), database=database, verbosity=0)
                    except (DeserializationError, DatabaseError) as exc:
                        raise BackupError(
                            f"The backup's rows could not be loaded: {exc}. Nothing was restored."
                        ) from exc
                _check_counts(manifest, database)
                unreadable = undecryptable_secrets()
                if unreadable:
                    raise BackupError(_undecryptable_message(describe(unreadable)))
                _extract_media(tar, media, written)
        except BaseException:
            for file in written:
                with contextlib.suppress(OSError):
                    file.unlink()
            raise
    return manifest


def _read(tar: tarfile.TarFile, name: str) -> bytes:
    member = tar.extractfile(name)
    if member is None:
        raise BackupError(f"{name} in the backup is not a file")
    return member.read()


def _refuse_populated(database: str) -> None:
    users = get_user_model()._base_manager.using(database)
    conversations = apps.get_model("conversations", "Conversation")._base_manager.using(database)
    held = [
        label
        for label, queryset in (("users", users), ("conversations", conversations))
        if queryset.exists()
    ]
    if held:
        raise BackupError(
            f"The database already holds {' and '.join(held)}: restore only into a new, "
            "empty database (`manage.py prepare_instance` and `manage.py migrate` first)."
        )


def _refuse_other_schema(manifest: Manifest, database: str) -> None:
    """The database is migrated exactly as the backup's was, or stop (the rows fit)."""
    here = _applied_migrations(database)
    there = manifest.data.get("migrations", {})
    missing, newer = _only_in(there, here), _only_in(here, there)
    if missing:
        raise BackupError(
            f"The backup's database had migrations this one has not: {', '.join(missing[:5])}. "
            "Run `manage.py migrate`, or restore with the release that made the backup "
            f"(agentsite {manifest.data.get('agentsite')})."
        )
    if newer:
        raise BackupError(
            f"This database has migrations the backup's had not: {', '.join(newer[:5])}. "
            f"Restore with the release that made the backup (agentsite "
            f"{manifest.data.get('agentsite')}), then upgrade and migrate."
        )


def _only_in(one: dict[str, list[str]], other: dict[str, list[str]]) -> list[str]:
    return sorted(
        f"{app}.{name}"
        for app, names in one.items()
        for name in set(names) - set(other.get(app, ()))
    )


def _refuse_undecryptable(rows: list[dict[str, Any]]) -> None:
    """Every secret in the dump decrypts with the keys configured here, or stop."""
    fields = {
        model._meta.label_lower: [f.name for f in model_fields]
        for model, model_fields in encrypted_fields()
    }
    failed: list[str] = []
    for row in rows:
        for name in fields.get(row["model"], ()):
            token = row["fields"].get(name)
            if not token:
                continue
            try:
                decrypt(token)
            except ValueError:
                failed.append(f"{row['model']} #{row.get('pk')} ({name})")
    if failed:
        raise BackupError(_undecryptable_message(describe(failed), count=len(failed)))


def _undecryptable_message(listed: str, *, count: int | None = None) -> str:
    how_many = f"{count} secret(s)" if count is not None else "Secret(s)"
    return (
        f"{how_many} in the backup cannot be decrypted with the configured "
        f"{key_setting_words()}: {listed}. Set {key_source()} to the key the "
        "backup was made with (ENCRYPTION_KEYS may list it after a new one) and restore "
        "again. Nothing was restored."
    )


def _check_counts(manifest: Manifest, database: str) -> None:
    wrong = []
    for label, expected in manifest.counts.items():
        try:
            model = apps.get_model(label)
        except LookupError:
            wrong.append(f"{label}: no such model here")
            continue
        found = model._base_manager.using(database).count()
        if found != expected:
            wrong.append(f"{label}: {found} rows, the backup has {expected}")
    if wrong:
        raise BackupError(
            "The restored rows do not match the backup: "
            + "; ".join(wrong)
            + ". Nothing was restored."
        )


def _extract_media(
    tar: tarfile.TarFile, members: list[tarfile.TarInfo], written: list[Path]
) -> None:
    """Write the media files under MEDIA_ROOT (refusing names outside it), adding each
    file made to ``written`` (removed again when the restore fails)."""
    root = Path(settings.MEDIA_ROOT).resolve()
    for member in members:
        relative = member.name[len(MEDIA) + 1 :]
        target = (root / relative).resolve()
        if not target.is_relative_to(root) or target == root:
            raise BackupError(f"{member.name}: a media path outside MEDIA_ROOT")
        if target.exists():
            raise BackupError(f"{target} exists already: restore into an empty MEDIA_ROOT")
        source = tar.extractfile(member)
        if source is None:
            continue
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        written.append(target)
        with os.fdopen(fd, "wb") as out, source:
            shutil.copyfileobj(source, out)
