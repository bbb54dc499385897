"""A file sent as the request's whole body, named in ``Content-Disposition`` (what the
site's own pages send: daphne parses a multipart body in memory, a raw one never): the
same checks and refusals as a multipart upload, on ``POST /api/files``, on a knowledge
base's documents (API and page), nothing kept of a refusal, memory flat for 20 MiB."""

from __future__ import annotations

import json
import tracemalloc

import httpx
import pytest
from django.test import Client, RequestFactory
from django.urls import resolve

from files.models import StoredFile
from files.raw_uploads import raw_file
from files.uploads import UploadTooLarge
from knowledge.models import Document, KnowledgeBase
from tests.files import builders
from tests.files.conftest import blobs

pytestmark = pytest.mark.django_db

MiB = 1024 * 1024


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def named(disposition: str) -> dict[str, str]:
    return {"Content-Disposition": disposition}


def raw(
    client, token, data: bytes, disposition: str | None, content_type="application/octet-stream"
):
    headers = bearer(token) | (named(disposition) if disposition else {})
    return client.generic("POST", "/api/files", data, content_type=content_type, headers=headers)


def assert_nothing_kept(media, upload_dir) -> None:
    assert StoredFile.objects.count() == 0
    assert blobs(media) == []
    assert list(upload_dir.iterdir()) == []


def error_of(response, status: int) -> str:
    assert response.status_code == status, response.content[:300]
    body = json.loads(response.content)
    assert list(body["fields"]) == ["file"]
    return body["error"]


@pytest.mark.parametrize(
    ("disposition", "data", "name", "content_type"),
    [
        ('attachment; filename="notes.txt"', "héllo\n".encode(), "notes.txt", "text/plain"),
        ('attachment; filename="report.pdf"', builders.pdf_with_text(["One"]), "report.pdf",
         "application/pdf"),
        ('attachment; filename="photo.jpg"', builders.png(), "photo.jpg", "image/png"),
        # RFC 6266's encoded form, as the pages send any name.
        ("attachment; filename*=UTF-8''%E5%A0%B1%E5%91%8A%20%281%29.md", b"# T\n",
         "報告 (1).md", "text/markdown"),
        ("attachment; filename*=UTF-8''..%2F..%2Fetc%2Fpasswd.txt", b"x", "passwd.txt",
         "text/plain"),
    ],
)  # fmt: skip
def test_a_named_raw_body_is_stored_like_a_multipart_file(
    client, token, upload_dir, disposition, data, name, content_type
):
    response = raw(client, token, data, disposition)
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["name"], body["size"], body["content_type"]) == (name, len(data), content_type)
    stored = StoredFile.objects.get(pk=body["id"])
    assert stored.blob.read() == data
    assert list(upload_dir.iterdir()) == []  # the temporary copy is gone


def test_the_content_type_sent_does_not_matter(client, token):
    response = raw(client, token, builders.png(), 'attachment; filename="a.png"', "text/plain")
    assert response.json()["content_type"] == "image/png"


@pytest.mark.parametrize(
    ("disposition", "content_type"),
    [
        (None, "application/octet-stream"),  # no name
        ("attachment", "application/octet-stream"),
        ('attachment; filename=""', "application/pdf"),
        (None, "application/json"),  # a JSON body is not a file
    ],
)
def test_a_raw_body_without_a_name_is_400_naming_the_header(
    client, token, media, upload_dir, disposition, content_type
):
    response = raw(client, token, b'{"a": 1}', disposition, content_type)
    assert "Content-Disposition" in error_of(response, 400)
    assert_nothing_kept(media, upload_dir)


def test_refusals_of_what_the_file_is_keep_nothing(client, token, media, upload_dir):
    for data, says in [
        (builders.pdf_encrypted(), "password-protected"),
        (builders.elf(), "This file is ELF"),
        (b"", "The file is empty."),
    ]:
        response = raw(client, token, data, 'attachment; filename="f.pdf"')
        assert says in error_of(response, 400)
    assert_nothing_kept(media, upload_dir)


def test_over_the_limit_is_413_and_keeps_nothing(client, token, settings, media, upload_dir):
    settings.AGENTSITE_FILE_MAX_BYTES = 100_000
    response = raw(client, token, b"x" * 100_001, 'attachment; filename="big.txt"')
    assert error_of(response, 413) == "The file is too large: the limit is 100,000 bytes."
    assert_nothing_kept(media, upload_dir)
    assert raw(client, token, b"x" * 100_000, 'attachment; filename="f.txt"').status_code == 201


def test_a_session_upload_needs_the_csrf_header(user, media, upload_dir):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    headers = named('attachment; filename="n.txt"')
    post = {"path": "/api/files", "data": b"hello", "content_type": "application/octet-stream"}
    refused = browser.generic("POST", **post, headers=headers)
    assert refused.status_code == 403
    assert_nothing_kept(media, upload_dir)
    browser.get("/settings/tokens/")  # any page sets the CSRF cookie
    csrf = browser.cookies["csrftoken"].value
    accepted = browser.generic("POST", **post, headers=headers | {"X-CSRFToken": csrf})
    assert accepted.status_code == 201, accepted.content


def test_a_20_mib_raw_body_is_read_to_disk_with_flat_memory(token, media, upload_dir):
    data = builders.png(extra=20 * MiB - len(builders.png()) - 14)
    assert len(data) == 20 * MiB  # the default limit, exactly
    request = RequestFactory().generic(
        "POST",
        "/api/files",
        data,
        content_type="image/png",
        headers=bearer(token) | named('attachment; filename="big.png"'),
    )
    del data
    tracemalloc.start()
    try:
        response = resolve("/api/files").func(request)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 201, response.content
    assert peak < 4 * MiB, f"peak {peak:,} bytes"
    assert StoredFile.objects.get().size == 20 * MiB
    assert list(upload_dir.iterdir()) == []


@pytest.mark.django_db(transaction=True)
async def test_a_body_of_unknown_length_is_refused_saying_so(token, settings, media, upload_dir):
    """Sent chunked through the ASGI application (no Content-Length): a clear 400, never
    "the file is empty", and the server goes on serving."""
    from agentsite.asgi import application

    async def chunks(count: int):
        for _ in range(count):
            yield b"line of text\n" * 5041

    headers = bearer(token) | named('attachment; filename="big.csv"')
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        refused = await http.post("/api/files", content=chunks(8), headers=headers)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"].startswith("Send the file with a Content-Length header")
        fits = await http.post("/api/files", content=b"a,b\n1,2\n" * 1000, headers=headers)
        assert fits.status_code == 201, fits.text
        assert fits.json()["content_type"] == "text/csv"
    assert await StoredFile.objects.acount() == 1
    assert list(upload_dir.iterdir()) == []


def test_a_body_longer_than_it_said_is_cut_at_the_limit(upload_dir):
    """What a server that does not hold a body to its Content-Length would hand over."""
    request = RequestFactory().generic(
        "POST", "/", b"x" * 5000, content_type="application/octet-stream",
        headers=named('attachment; filename="a.txt"'),
    )  # fmt: skip
    request.META["CONTENT_LENGTH"] = "10"  # the stream still holds the 5,000 bytes
    with pytest.raises(UploadTooLarge), raw_file(request, max_bytes=1000):
        pass
    assert list(upload_dir.iterdir()) == []


# ----------------------------------------------------------------- knowledge bases


def test_a_knowledge_document_from_a_raw_body(client, token, user):
    base = KnowledgeBase.objects.create(owner=user, name="Handbook")
    path = f"/api/knowledge/{base.pk}/documents"
    added = client.generic(
        "POST",
        path,
        b"# Leave\n\nTwenty-five days.",
        content_type="text/markdown",
        headers=bearer(token) | named('attachment; filename="leave.md"'),
    )
    assert added.status_code == 201, added.content
    assert (added.json()["name"], added.json()["status"]) == ("leave.md", "queued")
    assert Document.objects.get().file.owner == user
    # JSON without a name stays the request's own data: a URL or a 400 saying both ways.
    refused = client.post(path, {"nope": 1}, content_type="application/json", headers=bearer(token))
    assert refused.status_code == 400
    assert "Content-Disposition" in refused.json()["error"]


def test_the_knowledge_page_takes_a_raw_body_with_its_csrf_header(user, media, upload_dir):
    base = KnowledgeBase.objects.create(owner=user, name="Handbook")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    path = f"/knowledge/{base.pk}/upload/"
    headers = {"HX-Request": "true"} | named("attachment; filename*=UTF-8''pay%20day.txt")
    body = {"data": b"Paid on the 25th.", "content_type": "application/octet-stream"}
    assert browser.generic("POST", path, **body, headers=headers).status_code == 403
    assert not Document.objects.exists()

    browser.get(f"/knowledge/{base.pk}/")
    headers["X-CSRFToken"] = browser.cookies["csrftoken"].value
    added = browser.generic("POST", path, **body, headers=headers)
    assert added.status_code == 200, added.content
    assert "pay day.txt" in added.content.decode()
    assert Document.objects.get().name == "pay day.txt"

    elf = {"data": builders.elf(), "content_type": "application/octet-stream"}
    refused = browser.generic("POST", path, **elf, headers=headers)
    assert refused.status_code == 422
    assert "pay day.txt: This file is ELF" in refused.content.decode()
    assert list(upload_dir.iterdir()) == []
