"""files.services: what store() keeps when something fails late (nothing), and how
files go (with their blobs, after the commit; never from under a message)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from conversations.models import MessageFile
from conversations.services import conversation_create, message_create
from core.errors import ApplicationError
from files import services
from files.models import StoredFile
from tests.files.conftest import blobs

pytestmark = pytest.mark.django_db


def store(user, name: str = "n.txt", data: bytes = b"hello") -> StoredFile:
    return services.store(user, SimpleUploadedFile(name, data))


def test_a_failure_after_the_blob_is_written_removes_it(user, media, monkeypatch):
    def broken_save(self, *args, **kwargs):
        assert blobs(media), "the blob is written before the row"
        raise RuntimeError("the database went away")

    monkeypatch.setattr(StoredFile, "save", broken_save)
    with pytest.raises(RuntimeError):
        store(user)
    assert blobs(media) == [] and StoredFile.objects.count() == 0


def test_the_quota_is_checked_again_when_the_row_is_written(user, media, settings, monkeypatch):
    """Two uploads of one user at once: the second to take the lock sees the first."""
    settings.AGENTSITE_FILE_QUOTA_BYTES = 1000
    calls = []
    real = services.usage

    def racing_usage(owner):
        calls.append(owner)
        return real(owner) + (600 if len(calls) == 2 else 0)  # another upload landed

    monkeypatch.setattr(services, "usage", racing_usage)
    with pytest.raises(ApplicationError, match="storage quota"):
        store(user, data=b"x" * 600)
    assert blobs(media) == [] and StoredFile.objects.count() == 0


def test_deleting_a_file_removes_its_blob_after_the_commit(
    user, media, django_capture_on_commit_callbacks
):
    stored = store(user)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.delete(stored)
    assert len(blobs(media)) == 1  # not yet: the deletion could still roll back
    for callback in callbacks:
        callback()
    assert blobs(media) == []


def test_an_accounts_files_go_with_it(user, media, django_capture_on_commit_callbacks):
    store(user)
    with django_capture_on_commit_callbacks(execute=True):
        user.delete()
    assert StoredFile.objects.count() == 0 and blobs(media) == []


def test_delete_unattached_keeps_what_a_message_holds(
    user, media, django_capture_on_commit_callbacks
):
    held, free = store(user, "held.txt"), store(user, "free.txt")
    message = message_create(
        conversation=conversation_create(owner=user), role="user", content="see"
    )
    MessageFile.objects.create(message=message, file=held)
    with django_capture_on_commit_callbacks(execute=True):
        assert services.delete_unattached([held, free]) == 1
    assert list(StoredFile.objects.values_list("name", flat=True)) == ["held.txt"]
    assert len(blobs(media)) == 1
    with pytest.raises(ApplicationError) as refused:
        services.delete(held)
    assert refused.value.code == "conflict"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("", "file"),
        ("   ", "file"),
        ("report final.PDF", "report final.PDF"),
        ("e\u0301te\u0301.txt", "\u00e9t\u00e9.txt"),  # NFC
        ("dir/sub\\name.md", "name.md"),
        ("zero\u200bwidth.txt", "zerowidth.txt"),
        ("x" * 400, "x" * 255),
        ("y" * 300 + "." + "z" * 20, ("y" * 300 + "." + "z" * 20)[:255]),  # no real extension
    ],
)
def test_sanitize_name(raw, clean):
    assert services.sanitize_name(raw) == clean
