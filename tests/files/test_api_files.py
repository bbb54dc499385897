"""POST/GET/DELETE /api/files through the real URLconf and middleware: each kind stored
with what its bytes are, served to its owner only and safely, and every refusal (too
large, over quota, of a type not accepted, unreadable) a JSON error that keeps nothing:
no row, no blob, no temporary upload."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tracemalloc

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, RequestFactory
from django.urls import resolve

from conversations.models import MessageFile
from conversations.services import conversation_create, message_create
from files.detection import DOCX_TYPE
from files.models import StoredFile
from tests.files import builders
from tests.files.conftest import blobs

pytestmark = pytest.mark.django_db

MiB = 1024 * 1024


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def upload(client, token, name: str, data: bytes, content_type: str = "text/plain"):
    """Sent as a browser would, with a Content-Type the server must not believe."""
    file = SimpleUploadedFile(name, data, content_type=content_type)
    return client.post("/api/files", {"file": file}, headers=bearer(token))


def raw_multipart(filename: bytes, data: bytes, boundary: str = "b0undary") -> bytes:
    return (
        f"--{boundary}\r\n".encode()
        + b'Content-Disposition: form-data; name="file"; filename="'
        + filename
        + b'"\r\nContent-Type: application/octet-stream\r\n\r\n'
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )


def assert_nothing_kept(media, upload_dir) -> None:
    assert StoredFile.objects.count() == 0
    assert blobs(media) == []
    assert list(upload_dir.iterdir()) == []  # Django's temporary copy is gone too


def assert_json_error(response, status: int) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    body = json.loads(response.content)
    assert isinstance(body["error"], str) and body["error"]
    return body


KINDS = [
    ("notes.txt", "héllo\n".encode(), "text", "text/plain"),
    ("README.md", b"# Title\n", "text", "text/markdown"),
    ("main.py", b"print('hi')\n", "text", "text/plain"),
    ("table.csv", b"a,b\n1,2\n", "text", "text/csv"),
    ("data.json", b'{"a": 1}', "text", "application/json"),
    ("page.html", b"<h1>Hi</h1><script>x()</script>", "text", "text/html"),
    ("report.pdf", builders.pdf_with_text(["Page one"]), "pdf", "application/pdf"),
    ("report.docx", builders.docx_document(), "docx", DOCX_TYPE),
    ("photo.png", builders.png(), "image", "image/png"),
    ("photo.jpg", builders.jpeg(), "image", "image/jpeg"),
    ("photo.webp", builders.webp(), "image", "image/webp"),
    ("anim.gif", builders.gif(), "image", "image/gif"),
]


@pytest.mark.parametrize(("name", "data", "kind", "content_type"), KINDS, ids=builders.case_id)
def test_each_kind_is_stored_as_its_bytes_say(client, token, user, name, data, kind, content_type):
    response = upload(client, token, name, data, content_type="application/x-lies")
    assert response.status_code == 201, response.content
    body = response.json()
    stored = StoredFile.objects.get()
    assert body == {"id": stored.pk, "name": name, "size": len(data), "content_type": content_type}
    assert response["Location"] == f"/api/files/{stored.pk}"
    assert (stored.owner, stored.kind) == (user, kind)
    assert stored.sha256 == hashlib.sha256(data).hexdigest()
    path = stored.blob.path
    with open(path, "rb") as fh:
        assert fh.read() == data
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stored.blob.name.startswith(f"files/{user.pk}/") and name not in stored.blob.name


def test_extracted_text_is_kept_with_the_file(client, token):
    upload(client, token, "report.pdf", builders.pdf_with_text(["One", "Two"]))
    upload(client, token, "page.html", b"<h1>Hi</h1><script>steal()</script>")
    pdf, html = StoredFile.objects.order_by("id")
    assert (pdf.text, pdf.pages) == ("One\n\nTwo", [0, 5])
    assert html.text == "# Hi"


def test_metadata(client, token):
    data = builders.pdf_with_text(["a", "b"])
    file_id = upload(client, token, "r.pdf", data).json()["id"]
    response = client.get(f"/api/files/{file_id}", headers=bearer(token))
    assert response.status_code == 200
    body = response.json()
    created = body.pop("created_at")
    assert created
    assert body == {
        "id": file_id,
        "name": "r.pdf",
        "size": len(data),
        "content_type": "application/pdf",
        "kind": "pdf",
        "sha256": hashlib.sha256(data).hexdigest(),
        "pages": 2,
        "text_chars": len("a\n\nb"),
    }


@pytest.mark.parametrize(
    ("name", "data", "content_type", "disposition"),
    [
        ("r.pdf", builders.pdf_with_text(["x"]), "application/pdf", 'attachment; filename="r.pdf"'),
        ("p.html", b"<b>x</b>", "text/html; charset=utf-8", 'attachment; filename="p.html"'),
        ("n.txt", b"plain", "text/plain; charset=utf-8", 'attachment; filename="n.txt"'),
        ("i.png", builders.png(), "image/png", 'inline; filename="i.png"'),
    ],
    ids=builders.case_id,
)
def test_content_is_served_safely(client, token, name, data, content_type, disposition):
    file_id = upload(client, token, name, data).json()["id"]
    response = client.get(f"/api/files/{file_id}/content", headers=bearer(token))
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == data
    assert response["Content-Type"] == content_type
    assert response["Content-Disposition"] == disposition
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Cache-Control"] == "private, no-store"
    policy = response["Content-Security-Policy"]
    assert "sandbox" in policy and "default-src 'none'" in policy
    assert "frame-ancestors 'none'" in policy


def test_a_browser_session_reads_the_content_too(user_client, token):
    """A chip's image preview is an <img> on the chat page: the session's cookie works."""
    file_id = upload(user_client, token, "i.gif", builders.gif()).json()["id"]
    response = user_client.get(f"/api/files/{file_id}/content")
    assert response.status_code == 200 and response["Content-Type"] == "image/gif"


def test_delete_removes_the_row_and_the_blob(
    client, token, media, django_capture_on_commit_callbacks
):
    file_id = upload(client, token, "n.txt", b"bye").json()["id"]
    assert len(blobs(media)) == 1
    with django_capture_on_commit_callbacks(execute=True):  # the blob goes after the commit
        response = client.delete(f"/api/files/{file_id}", headers=bearer(token))
    assert response.status_code == 204
    assert StoredFile.objects.count() == 0 and blobs(media) == []
    assert_json_error(client.delete(f"/api/files/{file_id}", headers=bearer(token)), 404)


def test_another_users_file_is_404_on_every_endpoint(client, token, other_token, media):
    file_id = upload(client, token, "secret.txt", b"mine").json()["id"]
    for method, path in [
        ("get", f"/api/files/{file_id}"),
        ("get", f"/api/files/{file_id}/content"),
        ("delete", f"/api/files/{file_id}"),
    ]:
        answer = getattr(client, method)(path, headers=bearer(other_token))
        assert assert_json_error(answer, 404) == {"error": "Not found."}
        unknown = getattr(client, method)(path.replace(str(file_id), "999"), headers=bearer(token))
        assert assert_json_error(unknown, 404) == {"error": "Not found."}  # the same answer
    assert StoredFile.objects.count() == 1 and len(blobs(media)) == 1


def test_without_credentials_it_is_401(client):
    assert_json_error(client.get("/api/files/1"), 401)
    file = SimpleUploadedFile("n.txt", b"x")
    assert_json_error(client.post("/api/files", {"file": file}), 401)


# ------------------------------------------------------------------------- refusals


def test_over_the_size_limit_is_413_while_streaming_and_keeps_nothing(
    client, token, settings, media, upload_dir
):
    settings.AGENTSITE_FILE_MAX_BYTES = 100_000
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1000  # to a temporary file, as a large one goes
    response = upload(client, token, "big.txt", b"x" * 300_000)
    body = assert_json_error(response, 413)
    assert body["error"] == "The file is too large: the limit is 100,000 bytes."
    assert body["fields"] == {"file": [body["error"]]}
    assert_nothing_kept(media, upload_dir)
    # The limit itself is fine.
    assert upload(client, token, "fits.txt", b"x" * 100_000).status_code == 201


def test_a_huge_declared_length_is_413_before_reading_a_byte(client, token, media, upload_dir):
    body = raw_multipart(b"huge.bin", b"x" * 10)
    response = client.generic(
        "POST",
        "/api/files",
        body,
        content_type="multipart/form-data; boundary=b0undary",
        headers=bearer(token),
        CONTENT_LENGTH=str(5 * 1024**3),  # 5 GB said; reading past the 10 bytes would fail
    )
    assert assert_json_error(response, 413)["error"].startswith("The file is too large")
    assert_nothing_kept(media, upload_dir)


def test_over_the_quota_is_413_and_keeps_nothing_more(client, token, settings, media):
    settings.AGENTSITE_FILE_QUOTA_BYTES = 1000
    assert upload(client, token, "a.txt", b"a" * 600).status_code == 201
    body = assert_json_error(upload(client, token, "b.txt", b"b" * 600), 413)
    assert "over your storage quota of 1,000 bytes" in body["error"]
    assert StoredFile.objects.count() == 1 and len(blobs(media)) == 1
    assert upload(client, token, "c.txt", b"c" * 400).status_code == 201  # exactly full


def test_the_quota_is_per_user(client, token, other_token, settings):
    settings.AGENTSITE_FILE_QUOTA_BYTES = 1000
    assert upload(client, token, "a.txt", b"a" * 900).status_code == 201
    assert upload(client, other_token, "b.txt", b"b" * 900).status_code == 201


@pytest.mark.parametrize(
    ("name", "data", "says"),
    [
        ("locked.pdf", builders.pdf_encrypted(), "This PDF is password-protected"),
        ("locked.docx", builders.ole2_encrypted_package(), "password-protected"),
        ("broken.pdf", b"%PDF-1.4 and then nothing", "This PDF could not be read"),
        ("renamed.docx", builders.zip_with({"a.txt": b"x"}), "ZIP archive, not a Word"),
        ("renamed.pdf", bytes(range(256)) * 8, "neither UTF-8 text"),
        ("tool.txt", builders.elf(), "This file is ELF"),
        ("empty.txt", b"", "The file is empty."),
    ],
    ids=builders.case_id,
)
def test_a_file_of_the_wrong_kind_is_400_and_keeps_nothing(
    client, token, media, upload_dir, name, data, says
):
    body = assert_json_error(upload(client, token, name, data), 400)
    assert says in body["error"]
    assert list(body["fields"]) == ["file"]
    assert_nothing_kept(media, upload_dir)


def test_a_png_named_pdf_is_stored_as_an_image(client, token):
    body = upload(client, token, "scan.pdf", builders.png(), content_type="application/pdf")
    assert body.json()["content_type"] == "image/png"
    assert StoredFile.objects.get().kind == "image"


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        (b"../../etc/passwd.txt", "passwd.txt"),
        (b"C:\\\\Users\\\\me\\\\notes.txt", "notes.txt"),
        (b"bell\x07and\x1btab\there.txt", "bellandtabhere.txt"),
        ("rtl\u202etxt.exe".encode(), "rtltxt.exe"),
        (b"a<b>c:d|e?f*g.txt", "a_b_c_d_e_f_g.txt"),
        (b"...", "file"),
        (b"  .hidden.txt. ", "hidden.txt"),
        (b"n" * 300 + b".txt", "n" * 251 + ".txt"),
    ],
    ids=builders.case_id,
)
def test_names_are_sanitised(client, token, sent, kept):
    response = client.generic(
        "POST",
        "/api/files",
        raw_multipart(sent, b"hello"),
        content_type="multipart/form-data; boundary=b0undary",
        headers=bearer(token),
    )
    assert response.status_code == 201, response.content
    assert response.json()["name"] == kept
    assert StoredFile.objects.get().name == kept


def test_a_file_attached_to_a_message_cannot_be_deleted(client, token, user, media):
    file_id = upload(client, token, "n.txt", b"kept").json()["id"]
    conversation = conversation_create(owner=user, title="with a file")
    message = message_create(conversation=conversation, role="user", content="see file")
    MessageFile.objects.create(message=message, file_id=file_id)
    body = assert_json_error(client.delete(f"/api/files/{file_id}", headers=bearer(token)), 409)
    assert body["error"].startswith("This file is attached to a message")
    assert StoredFile.objects.filter(pk=file_id).exists() and len(blobs(media)) == 1


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"", "multipart/form-data; boundary=b0undary"),
        (
            b"--b0undary\r\nContent-Disposition: form-data; "
            b'name="other"\r\n\r\nx\r\n--b0undary--\r\n',
            "multipart/form-data; boundary=b0undary",
        ),
        (b"garbage without a boundary", "multipart/form-data; boundary=b0undary"),
        (b"x", "multipart/form-data"),  # no boundary at all
        (b"x", "multipart/form-data; boundary=" + "b" * 80),
        (json.dumps({"file": "x"}).encode(), "application/json"),
        (b"file=x", "application/x-www-form-urlencoded"),
        (raw_multipart(b"", b"no name"), "multipart/form-data; boundary=b0undary"),
    ],
    ids=builders.case_id,
)
def test_a_body_without_a_file_is_400_json(client, token, body, content_type, media, upload_dir):
    response = client.generic(
        "POST", "/api/files", body, content_type=content_type, headers=bearer(token)
    )
    assert_json_error(response, 400)
    assert_nothing_kept(media, upload_dir)


def test_a_session_upload_needs_the_csrf_header(user, media, upload_dir):
    """The front door reads a session's form for its CSRF token: the upload's limit is in
    place before that (else Django would refuse to set it: a 500), and a refusal keeps
    nothing."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    refused = browser.post("/api/files", {"file": SimpleUploadedFile("n.txt", b"hello")})
    assert "CSRF" in assert_json_error(refused, 403)["error"]
    assert_nothing_kept(media, upload_dir)
    browser.get("/settings/tokens/")  # any page sets the CSRF cookie
    csrf = browser.cookies["csrftoken"].value
    accepted = browser.post(
        "/api/files", {"file": SimpleUploadedFile("n.txt", b"hello")}, headers={"X-CSRFToken": csrf}
    )
    assert accepted.status_code == 201, accepted.content


# ------------------------------------------------------------------- streaming to disk


def test_a_20_mib_upload_streams_to_disk_with_flat_memory(token, media, upload_dir):
    """The body is read in chunks into a temporary file and copied to the blob in chunks:
    what the request allocates stays a small fraction of the file (the test's own copy
    of the body is made before measuring)."""
    data = builders.png(extra=20 * MiB - len(builders.png()) - 14)
    assert len(data) == 20 * MiB  # the default limit, exactly
    request = RequestFactory().post(
        "/api/files", {"file": SimpleUploadedFile("big.png", data)}, headers=bearer(token)
    )
    del data
    view = resolve("/api/files").func
    tracemalloc.start()
    try:
        response = view(request)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 201, response.content
    assert peak < 4 * MiB, f"peak {peak:,} bytes"
    stored = StoredFile.objects.get()
    assert stored.size == 20 * MiB and blobs(media) == [media / stored.blob.name]
    request.close()  # as the handler does at the end of a request
    assert list(upload_dir.iterdir()) == []


def test_one_byte_over_the_default_limit_is_413(token, media, upload_dir):
    data = builders.png(extra=20 * MiB - len(builders.png()) - 13)
    request = RequestFactory().post(
        "/api/files", {"file": SimpleUploadedFile("big.png", data)}, headers=bearer(token)
    )
    response = resolve("/api/files").func(request)
    assert_json_error(response, 413)
    request.close()
    assert_nothing_kept(media, upload_dir)


# ------------------------------------------------------------- through the ASGI server


@pytest.mark.django_db(transaction=True)
async def test_uploads_through_the_asgi_application(token, settings, media, upload_dir):
    """As daphne serves it: the sync view on the WSGI threads (a2wsgi), the body streamed
    to it in pieces."""
    import httpx

    from agentsite.asgi import application

    settings.AGENTSITE_FILE_MAX_BYTES = 4 * MiB
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        data = b"line of text\n" * (3 * MiB // 13)
        files = {"file": ("big.csv", data, "application/octet-stream")}
        response = await http.post("/api/files", files=files, headers=bearer(token))
        assert response.status_code == 201, response.text
        assert response.json()["content_type"] == "text/csv"
        # Declared too large (refused before reading), then a little too large (refused
        # while streaming, the rest of the body left unread): the server goes on serving.
        for extra in (data, b"x" * (MiB + 100)):
            too_big = {"file": ("bigger.csv", data + extra, "text/csv")}
            refused = await http.post("/api/files", files=too_big, headers=bearer(token))
            assert refused.status_code == 413, refused.text
            assert refused.json()["error"] == "The file is too large: the limit is 4 MiB."
        again = await http.get(f"/api/files/{response.json()['id']}", headers=bearer(token))
        assert again.status_code == 200
    assert len(blobs(media)) == 1
    assert list(upload_dir.iterdir()) == []
