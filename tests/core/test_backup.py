"""``core.backup`` in process, on the suite's SQLite database: a round trip through an
emptied database, what the archive holds, and the restores it refuses (issue 44).

The move of a populated instance to PostgreSQL, command by command, is
tests/integration/test_backup.py."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command

from audit.models import AuditEvent
from conversations import services
from conversations.models import Message
from core.backup import BackupError, backup, restore
from core.crypto import generate_key, reset_cache
from llms.models import Provider
from llms.services import model_upsert, provider_upsert

SECRET = "sk-unit-PLAINTEXT-51c0"
WHEN = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)


@pytest.fixture(autouse=True)
def keys(settings, tmp_path) -> Iterator[None]:
    settings.ENCRYPTION_KEYS = [generate_key()]
    settings.MEDIA_ROOT = tmp_path / "media"
    reset_cache()
    yield
    reset_cache()


def populate(media) -> dict:
    # The log's ids start past 1: a row written while loading would not be overwritten.
    AuditEvent.objects.create(pk=100, action="setup")
    user = get_user_model().objects.create_user(username="bob", password="pw-bob-12345")
    user.groups.add(Group.objects.create(name="ops"))  # audited once: group.joined
    provider, _ = provider_upsert(name="p", base_url="https://x.invalid/v1", api_key=SECRET)
    model, _ = model_upsert(provider=provider, model_id="m")
    conversation = services.conversation_create(owner=user, title="t", model=model)
    message = services.message_create(conversation=conversation, role="user", content="hé")
    Message.objects.filter(pk=message.pk).update(created_at=WHEN)
    (media / "artifacts" / "1").mkdir(parents=True)
    (media / "artifacts" / "1" / "a.bin").write_bytes(b"\x00\x01bytes")
    (media / "artifacts" / "0").mkdir()
    (media / "artifacts" / "0" / "first.bin").write_bytes(b"first")  # extracted first
    return {"message": message.pk, "events": AuditEvent.objects.count()}


@pytest.mark.django_db(transaction=True)
def test_round_trip_through_an_emptied_database(settings, tmp_path):
    media = tmp_path / "media"
    made = populate(media)
    archive = tmp_path / "b.tar.gz"
    manifest = backup(archive)

    with tarfile.open(archive) as tar:
        blobs = [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]
        assert "media/artifacts/1/a.bin" in tar.getnames()
    assert not [blob for blob in blobs if SECRET.encode() in blob]
    assert manifest.counts["llms.provider"] == 1
    assert manifest.data["encryption_key_from"] == "ENCRYPTION_KEYS"
    assert settings.ENCRYPTION_KEYS[0] not in json.dumps(manifest.data)

    call_command("flush", interactive=False, verbosity=0)  # content types made again
    # A media file in the way: the rows loaded are rolled back, no file is left behind.
    (media / "artifacts" / "0" / "first.bin").unlink()
    (media / "artifacts" / "1" / "a.bin").write_bytes(b"other")
    with pytest.raises(BackupError, match="a.bin exists already"):
        restore(archive)
    assert not Provider.objects.exists() and not AuditEvent.objects.exists()
    assert not (media / "artifacts" / "0" / "first.bin").exists()
    (media / "artifacts" / "1" / "a.bin").unlink()
    restore(archive)

    assert Provider.objects.get().api_key == SECRET
    user = get_user_model().objects.get(username="bob")
    assert list(user.groups.values_list("name", flat=True)) == ["ops"]
    assert user.check_password("pw-bob-12345")
    # Times to the microsecond; the membership loaded is not audited a second time.
    assert Message.objects.get(pk=made["message"]).created_at == WHEN
    assert AuditEvent.objects.count() == made["events"]
    assert AuditEvent.objects.filter(action="group.joined").count() == 1
    assert (media / "artifacts" / "1" / "a.bin").read_bytes() == b"\x00\x01bytes"
    assert (media / "artifacts" / "0" / "first.bin").read_bytes() == b"first"


@pytest.mark.django_db
def test_refuses_a_database_holding_users(tmp_path):
    archive = tmp_path / "b.tar.gz"
    backup(archive)
    get_user_model().objects.create_user(username="there", password="pw-there-123")
    with pytest.raises(BackupError, match="already holds users"):
        restore(archive)


@pytest.mark.django_db
@pytest.mark.parametrize("derived", [False, True], ids=["ENCRYPTION_KEYS", "SECRET_KEY"])
def test_refuses_a_key_that_cannot_read_the_backup_and_writes_nothing(settings, tmp_path, derived):
    if derived:
        settings.ENCRYPTION_KEYS = []
        reset_cache()
    populate(tmp_path / "media")
    archive = tmp_path / "b.tar.gz"
    assert backup(archive).data["encryption_key_from"] == (
        "SECRET_KEY" if derived else "ENCRYPTION_KEYS"
    )
    get_user_model().objects.all().delete()  # no users nor conversations: restorable
    Provider.objects.all().delete()
    if derived:
        settings.SECRET_KEY = "another-secret-key-" + "y" * 40
    else:
        settings.ENCRYPTION_KEYS = [generate_key()]
    reset_cache()
    setting = (
        r"SECRET_KEY \(ENCRYPTION_KEYS is empty: the key derives from it\)"
        if derived
        else "ENCRYPTION_KEYS"
    )
    with pytest.raises(BackupError, match=f"configured {setting}: llms.provider #"):
        restore(archive)
    assert not Provider.objects.exists()
    assert not get_user_model().objects.exists()


def rewrite_manifest(archive, change) -> None:
    with tarfile.open(archive) as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar]
    with tarfile.open(archive, "w:gz") as out:
        for member, data in members:
            if member.name == "manifest.json":
                data = json.dumps(change(json.loads(data))).encode()
                member.size = len(data)
            out.addfile(member, io.BytesIO(data) if data is not None else None)


@pytest.mark.django_db
def test_refuses_a_database_migrated_otherwise(tmp_path):
    archive = tmp_path / "b.tar.gz"
    backup(archive)
    rewrite_manifest(archive, lambda m: {**m, "migrations": {"llms": ["9999_future"]}})
    with pytest.raises(BackupError, match="had migrations this one has not: llms.9999_future"):
        restore(archive)


@pytest.mark.django_db
def test_refuses_a_damaged_archive(tmp_path):
    archive = tmp_path / "b.tar.gz"
    backup(archive)
    archive.write_bytes(archive.read_bytes()[:200])
    with pytest.raises(BackupError, match="not a backup, or damaged"):
        restore(archive)


def test_never_writes_over_an_existing_file(tmp_path):
    archive = tmp_path / "b.tar.gz"
    archive.write_bytes(b"yesterday's backup")
    with pytest.raises(BackupError, match="exists already"):
        backup(archive)
    assert archive.read_bytes() == b"yesterday's backup"
