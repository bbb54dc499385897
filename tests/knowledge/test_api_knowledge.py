"""/api/knowledge through the real URLconf and middleware: bases, documents (upload or
URL), search; another user's base is a 404 everywhere, a shared base read-only."""

from __future__ import annotations

import httpx
import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile

from conversations import knowledge_sources
from files.models import StoredFile
from knowledge import indexing, selectors
from knowledge.models import Document, KnowledgeBase
from tests.knowledge.conftest import add_indexed
from tools.net.safehttp import FetchedResponse

pytestmark = pytest.mark.django_db


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def api(client, token):
    """Calls as alice."""

    class Api:
        def get(self, path: str, **params):
            return client.get(path, params, headers=bearer(token))

        def post(self, path: str, json=None, file=None):
            if file is not None:
                return client.post(path, {"file": file}, headers=bearer(token))
            return client.post(path, json, content_type="application/json", headers=bearer(token))

        def delete(self, path: str):
            return client.delete(path, headers=bearer(token))

    return Api()


def test_create_list_add_search_delete(api, user, django_capture_on_commit_callbacks, monkeypatch):
    monkeypatch.setattr(indexing, "schedule", lambda document_id: None)
    created = api.post("/api/knowledge", {"name": "  Team   handbook "})
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["name"], body["read_only"], body["document_count"]) == (
        "Team handbook",
        False,
        0,
    )
    base_id = body["id"]

    upload = SimpleUploadedFile("leave.md", b"# Leave\n\nTwenty-five days of annual leave.")
    added = api.post(f"/api/knowledge/{base_id}/documents", file=upload)
    assert added.status_code == 201, added.content
    assert added.json()["status"] == "queued"
    document_id = added.json()["id"]
    stored = Document.objects.get(pk=document_id).file
    assert stored.owner == user  # the owner's file, under their quota

    listed = api.get(f"/api/knowledge/{base_id}/documents").json()
    assert [(d["id"], d["status"], d["error"]) for d in listed] == [(document_id, "queued", "")]
    indexing.index_document(document_id)
    assert api.get(f"/api/knowledge/{base_id}/documents").json()[0]["status"] == "ready"

    found = api.get(f"/api/knowledge/{base_id}/search", q="annual leave", k=3)
    assert found.status_code == 200, found.content
    [hit] = found.json()["results"]
    assert hit["document_id"] == document_id
    assert (hit["document_name"], hit["heading"], hit["page"]) == ("leave.md", "Leave", None)
    assert set(hit) == {
        "chunk_id", "document_id", "document_name", "page", "heading", "text", "score"
    }  # fmt: skip
    assert api.get(f"/api/knowledge/{base_id}/search", q="x", k=0).status_code == 400

    assert api.get("/api/knowledge").json()[0]["document_count"] == 1
    gone = api.delete(f"/api/knowledge/{base_id}/documents/{document_id}")
    assert gone.status_code == 204
    assert not StoredFile.objects.filter(pk=stored.pk).exists()  # the base's file went too
    assert api.delete(f"/api/knowledge/{base_id}").status_code == 204
    assert api.get("/api/knowledge").json() == []


def test_bad_input_is_a_400(api, user) -> None:
    assert api.post("/api/knowledge", {"name": "  "}).status_code == 400
    base = KnowledgeBase.objects.create(owner=user, name="B")
    path = f"/api/knowledge/{base.pk}/documents"
    assert api.post(path, {"nope": 1}).status_code == 400
    assert api.post(path, {"url": "file:///etc/passwd"}).status_code == 400
    image = SimpleUploadedFile("x.png", b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    assert api.post(path, file=image).status_code == 400
    assert StoredFile.objects.count() == 0


def test_a_url_is_fetched_through_the_guard_and_kept_as_markdown(api, user, monkeypatch):
    base = KnowledgeBase.objects.create(owner=user, name="Web")
    path = f"/api/knowledge/{base.pk}/documents"
    # The guard itself: a loopback address is refused, nothing fetched or kept.
    refused = api.post(path, {"url": "http://127.0.0.1:9/private"})
    assert refused.status_code == 400
    assert "refused" in refused.json()["error"]

    async def fetched(method, url, **kwargs):
        html = b"<html><head><title>Leave policy</title></head><body><nav>menu</nav>"
        html += b"<main><h2>Annual</h2><p>25 days.</p></main></body></html>"
        headers = httpx.Headers({"content-type": "text/html; charset=utf-8"})
        return FetchedResponse(url, 200, headers, html, False)

    monkeypatch.setattr(knowledge_sources, "safe_request", fetched)
    added = api.post(path, {"url": "https://example.org/leave"})
    assert added.status_code == 201, added.content
    document = Document.objects.get(pk=added.json()["id"])
    assert (document.name, document.source_url) == ("Leave policy.md", "https://example.org/leave")
    assert document.file.text.startswith("# Leave policy\n\n## Annual\n\n25 days.")
    assert "menu" not in document.file.text


def test_another_users_base_is_a_404_everywhere(api, other_user) -> None:
    theirs = KnowledgeBase.objects.create(owner=other_user, name="Theirs")
    document = add_indexed(theirs, "t.md", "private words")
    base = f"/api/knowledge/{theirs.pk}"
    assert api.get(f"{base}/documents").status_code == 404
    assert api.get(f"{base}/search", q="private").status_code == 404
    assert api.post(f"{base}/documents", {"url": "https://example.org"}).status_code == 404
    assert api.delete(f"{base}/documents/{document.pk}").status_code == 404
    assert api.delete(base).status_code == 404
    assert api.get("/api/knowledge").json() == []
    assert Document.objects.filter(pk=document.pk).exists()


def test_a_document_of_another_base_is_a_404(api, user, other_user) -> None:
    mine = KnowledgeBase.objects.create(owner=user, name="Mine")
    theirs = KnowledgeBase.objects.create(owner=other_user, name="Theirs")
    document = add_indexed(theirs, "t.md", "words")
    assert api.delete(f"/api/knowledge/{mine.pk}/documents/{document.pk}").status_code == 404
    assert Document.objects.filter(pk=document.pk).exists()


def test_a_shared_base_is_readable_not_writable(api, user, other_user) -> None:
    shared = KnowledgeBase.objects.create(owner=other_user, name="Policies")
    document = add_indexed(shared, "p.md", "# Travel\n\nBook trains, not planes.")
    team = Group.objects.create(name="team")
    user.groups.add(team)
    shared.shared_groups.add(team)

    [listed] = api.get("/api/knowledge").json()
    assert (listed["name"], listed["read_only"], listed["shared"], listed["owner"]) == (
        "Policies",
        True,
        True,
        other_user.username,
    )
    base = f"/api/knowledge/{shared.pk}"
    assert [d["id"] for d in api.get(f"{base}/documents").json()] == [document.pk]
    assert len(api.get(f"{base}/search", q="trains").json()["results"]) == 1

    for refused in (
        api.post(f"{base}/documents", file=SimpleUploadedFile("n.txt", b"new")),
        api.delete(f"{base}/documents/{document.pk}"),
        api.delete(base),
    ):
        assert refused.status_code == 404
        assert refused.json()["error"] == selectors.READ_ONLY_MESSAGE
    assert Document.objects.filter(base=shared).count() == 1
