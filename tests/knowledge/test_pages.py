"""The Knowledge pages (issue 45) through the real URLconf, middleware and templates: the
list of one's own and shared bases, creating one (refusals beside their field, nothing
typed lost), a base's documents (upload, a URL the SSRF guard refuses, re-index, remove),
deleting a base, a shared base read-only, another user's a 404; and the chat header's
control that attaches bases to a conversation."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from conversations import services as conversation_services
from files.models import StoredFile
from knowledge import indexing
from knowledge.models import Document, KnowledgeBase
from tests.knowledge.conftest import add_indexed

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def text(response) -> str:
    """What a reader sees of a page: its text without tags, spaces collapsed."""
    body = re.sub(r"<[^>]+>", " ", response.content.decode())
    return " ".join(html.unescape(body).split())


def row(response, document: Document) -> str:
    """The text of a document's row in the documents' table."""
    found = re.search(
        rf'<tr id="document-{document.pk}".*?</tr>', response.content.decode(), re.DOTALL
    )
    assert found, f"no row for document {document.pk}"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found.group(0))).split())


@pytest.fixture
def shared_base(user, other_user) -> KnowledgeBase:
    """bob's base, shared with a group alice is in."""
    base = KnowledgeBase.objects.create(owner=other_user, name="Travel policy")
    add_indexed(base, "travel.md", "# Travel\n\nBook trains, not planes.")
    team = Group.objects.create(name="team")
    user.groups.add(team)
    base.shared_groups.add(team)
    return base


def test_the_list_shows_own_and_shared_bases_with_their_counts(
    user_client, user, other_user, shared_base
) -> None:
    mine = KnowledgeBase.objects.create(owner=user, name="Handbook", description="HR rules")
    add_indexed(mine, "leave.md", "Twenty-five days of leave.")
    add_indexed(mine, "pay.md", "Paid monthly.")
    KnowledgeBase.objects.create(owner=other_user, name="Bob's private notes")

    page = user_client.get("/knowledge/")
    assert page.status_code == 200
    seen = text(page)
    assert "Your knowledge bases Handbook 2 documents HR rules" in seen
    assert "Shared with you Travel policy read-only by bob · 1 document" in seen
    assert "Bob's private notes" not in seen
    assert f'href="/knowledge/{mine.pk}/"' in page.content.decode()
    # Every page's navigation leads there.
    assert '<a href="/knowledge/">Knowledge</a>' in user_client.get("/").content.decode()


def test_creating_a_base_refuses_bad_input_beside_the_field_and_keeps_it(user_client, user) -> None:
    refused = user_client.post("/knowledge/", {"name": "   ", "description": "Leave and pay"})
    assert refused.status_code == 422
    body = refused.content.decode()
    assert (
        '<p id="kb-name-error" class="error field-error">Give the knowledge base a name.</p>'
        in (body)
    )
    assert 'aria-describedby="kb-name-error"' in body
    assert ">Leave and pay</textarea>" in body  # what was typed is still there
    long_name = "n" * 201
    refused = user_client.post("/knowledge/", {"name": long_name, "description": ""})
    assert "A name is at most 200 characters." in text(refused)
    assert f'value="{long_name}"' in refused.content.decode()
    assert not KnowledgeBase.objects.exists()

    created = user_client.post("/knowledge/", {"name": " Team  handbook ", "description": "HR"})
    base = KnowledgeBase.objects.get()
    assert (base.owner, base.name, base.description) == (user, "Team handbook", "HR")
    assert created.status_code == 302 and created["Location"] == f"/knowledge/{base.pk}/"
    page = user_client.get(created["Location"])
    assert "Knowledge base “Team handbook” created." in text(page)
    assert "No documents yet. Add files or a web page below." in text(page)


def test_uploaded_files_are_queued_then_shown_ready(user_client, user) -> None:
    base = KnowledgeBase.objects.create(owner=user, name="Handbook")
    files = [
        SimpleUploadedFile("leave.md", b"# Leave\n\nTwenty-five days of annual leave."),
        SimpleUploadedFile("pay.txt", b"Salaries are paid on the 25th."),
    ]
    added = user_client.post(f"/knowledge/{base.pk}/upload/", {"file": files})
    assert added.status_code == 302 and added["Location"] == f"/knowledge/{base.pk}/"
    leave, pay = Document.objects.filter(base=base).order_by("name")
    assert leave.file.owner == user  # the owner's file, under their quota

    page = user_client.get(f"/knowledge/{base.pk}/")
    assert row(page, leave) == "leave.md 42 bytes queued – Remove"
    # While something is still to index, the list asks again by itself.
    assert 'hx-trigger="every 2s"' in page.content.decode()

    indexing.index_document(leave.pk)
    indexing.index_document(pay.pk)
    polled = user_client.get(f"/knowledge/{base.pk}/documents/", headers=HTMX)
    assert row(polled, leave) == "leave.md 42 bytes ready 1 Remove"
    assert row(polled, pay) == "pay.txt 30 bytes ready 1 Remove"
    assert "hx-trigger" not in polled.content.decode()  # all settled: the polling stops


def test_a_refused_upload_says_why_beside_the_field(user_client, user, settings) -> None:
    base = KnowledgeBase.objects.create(owner=user, name="Handbook")
    path = f"/knowledge/{base.pk}/upload/"
    image = SimpleUploadedFile("photo.png", b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    refused = user_client.post(path, {"file": image}, headers=HTMX)  # as knowledge.js sends
    assert refused.status_code == 422
    assert (
        '<ul hx-swap-oob="beforeend:#upload-errors"><li>photo.png: An image has no text to '
        "search: upload a document (text, PDF, Word, HTML).</li></ul>"
    ) in refused.content.decode()

    nothing = user_client.post(path, {})
    assert nothing.status_code == 422
    assert "Choose one or more files to add." in text(nothing)

    settings.AGENTSITE_FILE_MAX_BYTES = 100
    big = SimpleUploadedFile("big.txt", b"x" * 1000)
    too_large = user_client.post(path, {"file": big})
    assert too_large.status_code == 422
    assert "The file is too large: the limit is 100 bytes." in text(too_large)
    assert not Document.objects.exists() and not StoredFile.objects.exists()


def test_an_upload_needs_the_csrf_token(user, tmp_path) -> None:
    """The upload view checks CSRF itself (after putting the size limit in place)."""
    base = KnowledgeBase.objects.create(owner=user, name="Handbook")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    upload = SimpleUploadedFile("leave.md", b"Leave.")
    assert browser.post(f"/knowledge/{base.pk}/upload/", {"file": upload}).status_code == 403
    assert not Document.objects.exists()


def test_a_url_the_guard_refuses_adds_nothing_and_keeps_the_url(user_client, user) -> None:
    base = KnowledgeBase.objects.create(owner=user, name="Web")
    path = f"/knowledge/{base.pk}/url/"
    url = "http://127.0.0.1:9/private"
    refused = user_client.post(path, {"url": url}, headers=HTMX)
    assert refused.status_code == 422
    body = refused.content.decode()
    assert body.lstrip().startswith('<form id="url-form"')  # the form again, in its place
    assert f'value="{url}"' in body
    assert re.search(r'id="kb-url-error"[^>]*>This URL is refused: ', body)

    plain = user_client.post(path, {"url": "ftp://example.org/file"})
    assert plain.status_code == 422
    assert "Give an http:// or https:// URL." in text(plain)
    assert 'value="ftp://example.org/file"' in plain.content.decode()
    assert not Document.objects.exists() and not StoredFile.objects.exists()


def test_a_failed_document_is_indexed_again(user_client, user) -> None:
    base = KnowledgeBase.objects.create(owner=user, name="Handbook")
    document = add_indexed(base, "leave.md", "Twenty-five days.")
    reason = "No text could be read from this document."
    Document.objects.filter(pk=document.pk).update(status="failed", error=reason)

    page = user_client.get(f"/knowledge/{base.pk}/")
    assert row(page, document) == f"leave.md 17 bytes failed {reason} – Re-index Remove"

    again = user_client.post(f"/knowledge/{base.pk}/documents/{document.pk}/reindex/", headers=HTMX)
    assert row(again, document) == "leave.md 17 bytes queued – Remove"
    document.refresh_from_db()
    assert (document.status, document.error) == ("queued", "")
    assert indexing.index_document(document.pk) == "ready"


def test_removing_a_document_and_deleting_the_base(user_client, user) -> None:
    base = KnowledgeBase.objects.create(owner=user, name="Handbook")
    leave = add_indexed(base, "leave.md", "Twenty-five days.")
    pay = add_indexed(base, "pay.md", "Monthly.")

    removed = user_client.post(f"/knowledge/{base.pk}/documents/{leave.pk}/delete/", headers=HTMX)
    assert removed.status_code == 200
    assert "leave.md" not in text(removed) and "pay.md" in text(removed)
    assert not StoredFile.objects.filter(pk=leave.file_id).exists()

    deleted = user_client.post(f"/knowledge/{base.pk}/delete/")
    assert deleted.status_code == 302 and deleted["Location"] == "/knowledge/"
    assert "Knowledge base “Handbook” deleted." in text(user_client.get("/knowledge/"))
    assert not KnowledgeBase.objects.exists()
    assert not StoredFile.objects.filter(pk=pay.file_id).exists()


def test_a_shared_base_is_read_only(user_client, shared_base) -> None:
    document = shared_base.documents.get()
    page = user_client.get(f"/knowledge/{shared_base.pk}/")
    assert page.status_code == 200
    assert "Shared with you by bob" in text(page)
    assert row(page, document) == "travel.md 34 bytes ready 1"  # no actions
    main = page.content.decode().split('<main id="main"')[1].split("</main>")[0]
    assert "<form" not in main and "hx-post" not in main  # nothing to change

    base = f"/knowledge/{shared_base.pk}"
    for refused in (
        user_client.post(f"{base}/upload/", {"file": SimpleUploadedFile("n.txt", b"new")}),
        user_client.post(f"{base}/url/", {"url": "https://example.org/"}),
        user_client.post(f"{base}/documents/{document.pk}/delete/", headers=HTMX),
        user_client.post(f"{base}/documents/{document.pk}/reindex/", headers=HTMX),
        user_client.post(f"{base}/delete/"),
    ):
        assert refused.status_code == 404
    assert shared_base.documents.count() == 1
    assert Document.objects.get(pk=document.pk).status == "ready"


def test_another_users_private_base_is_a_404(user_client, other_user) -> None:
    theirs = KnowledgeBase.objects.create(owner=other_user, name="Private")
    document = add_indexed(theirs, "secret.md", "Private words.")
    base = f"/knowledge/{theirs.pk}"
    for response in (
        user_client.get(f"{base}/"),
        user_client.get(f"{base}/documents/"),
        user_client.post(f"{base}/upload/", {"file": SimpleUploadedFile("n.txt", b"new")}),
        user_client.post(f"{base}/documents/{document.pk}/delete/"),
        user_client.post(f"{base}/delete/"),
    ):
        assert response.status_code == 404
    assert KnowledgeBase.objects.filter(pk=theirs.pk).exists()
    assert Document.objects.filter(pk=document.pk).exists()


def test_bases_are_attached_from_the_chat_header(
    user_client, user, other_user, shared_base
) -> None:
    mine = KnowledgeBase.objects.create(owner=user, name="Handbook")
    private = KnowledgeBase.objects.create(owner=other_user, name="Bob's private notes")
    conversation = conversation_services.conversation_create(owner=user, title="Questions")
    chat = f"/c/{conversation.pk}/"
    control = f"/c/{conversation.pk}/knowledge/"

    page = user_client.get(chat).content.decode()
    assert f'hx-get="{control}"' in page  # the header's menu loads its list when opened
    assert '<ul id="knowledge-chips" class="knowledge-chips"' in page

    listed = user_client.get(control, headers=HTMX)
    assert text(listed).startswith(
        "Knowledge bases the agent searches in this chat Handbook Travel policy by bob Save"
    )
    assert "Bob's private notes" not in text(listed)
    assert re.search(r'<label class="check"><input type="checkbox" name="knowledge"', listed.text)

    saved = user_client.post(control, {"knowledge": [mine.pk, shared_base.pk]}, headers=HTMX)
    assert saved.status_code == 200
    assert "Saved." in text(saved)
    chips = re.search(r'<ul id="knowledge-chips"[^>]*>', saved.text)
    assert chips and 'hx-swap-oob="true"' in chips.group(0)  # the header's chips follow
    assert set(conversation.knowledge.all()) == {mine, shared_base}
    assert (
        len(re.findall(r'<input type="checkbox" name="knowledge" value="\d+" checked>', saved.text))
        == 2
    )

    # After a reload too, the header shows what the agent searches.
    chips = re.search(r'<ul id="knowledge-chips".*?</ul>', user_client.get(chat).text, re.DOTALL)
    assert " ".join(re.sub(r"<[^>]+>", " ", chips.group(0)).split()) == "Handbook Travel policy"

    refused = user_client.post(control, {"knowledge": [mine.pk, private.pk]}, headers=HTMX)
    assert refused.status_code == 422
    assert f"No knowledge base {private.pk} that you may read." in text(refused)
    assert set(conversation.knowledge.all()) == {mine, shared_base}  # nothing changed

    # A base unshared since is neither shown in the header nor listed as attached.
    shared_base.shared_groups.clear()
    shared_base.shared_with_everyone = False
    shared_base.save()
    chips = re.search(r'<ul id="knowledge-chips".*?</ul>', user_client.get(chat).text, re.DOTALL)
    assert " ".join(re.sub(r"<[^>]+>", " ", chips.group(0)).split()) == "Handbook"
    assert "Travel policy" not in text(user_client.get(control, headers=HTMX))

    cleared = user_client.post(control, {})  # a plain form post: back to the chat
    assert cleared.status_code == 302 and cleared["Location"] == chat
    assert not conversation.knowledge.exists()


def test_another_users_chat_has_no_knowledge_control(client, other_user, user) -> None:
    conversation = conversation_services.conversation_create(owner=user)
    client.force_login(other_user)
    assert client.get(f"/c/{conversation.pk}/knowledge/").status_code == 404
    assert client.post(f"/c/{conversation.pk}/knowledge/", {"knowledge": []}).status_code == 404
