"""The admin lists stored files, read-only, without their bytes or text."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from files import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored(user):
    return services.store(user, SimpleUploadedFile("secret-notes.md", b"# the user's words"))


def test_the_list_shows_owner_name_kind_size_and_date(admin_client, stored):
    response = admin_client.get(reverse("admin:files_storedfile_changelist"))
    assert response.status_code == 200
    html = response.content.decode()
    for shown in ("secret-notes.md", "alice", "Text", "18"):
        assert shown in html


def test_a_file_is_read_only_and_its_text_is_not_shown(admin_client, stored):
    page = admin_client.get(reverse("admin:files_storedfile_change", args=[stored.pk]))
    assert page.status_code == 200
    assert "the user&#x27;s words" not in page.content.decode()
    assert 'name="name"' not in page.content.decode()  # no input: read-only
    assert admin_client.get(reverse("admin:files_storedfile_add")).status_code == 403
    delete = reverse("admin:files_storedfile_delete", args=[stored.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
