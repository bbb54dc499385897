"""Shared links keep an answer's citations working for anyone with the link (copies of the
cited passages, served by the share), and show attached files only if the owner ticked it."""

from __future__ import annotations

import json
import re

import pytest

from conversations.models import SharedLink
from conversations.transfer import sharing
from knowledge.models import Chunk, KnowledgeBase
from tests.conversations.transfer.cited import NOTES, PASSAGES, PNG, cited_chat

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def chat(user):
    return cited_chat(user)


def _public_html(client, share: SharedLink) -> str:
    client.logout()
    response = client.get(sharing.share_url(share))
    assert response.status_code == 200
    return response.content.decode()


def _links(html: str) -> list[tuple[str, str, str]]:
    """Each inline citation: (href, accessible name, text)."""
    return re.findall(
        r'<sup class="citation"><a href="([^"]+)" title="[^"]*" aria-label="([^"]+)"[^>]*>'
        r"([^<]+)</a></sup>",
        html,
    )


def test_the_shared_page_links_citations_to_copies_on_the_share(client, chat):
    share = sharing.share_create(conversation=chat.conversation)
    html = _public_html(client, share)
    base = f"/s/{share.token}/passages/"

    assert _links(html) == [
        (f"{base}0/", "Source 1: handbook.pdf, page 3, Holidays", "[1]"),
        (f"{base}1/", "Source 2: handbook.pdf, page 4, Holidays › Carry-over", "[2]"),
    ]
    assert "The contract [9] says more." in html  # no such source: plain text
    assert "leave[3] = 0" in html  # code untouched
    sources = re.search(r'<ol class="sources" aria-label="Sources">(.*?)</ol>', html).group(1)
    assert re.findall(r'<li value="(\d+)"><a href="([^"]+)"', sources) == [
        ("1", f"{base}0/"),
        ("2", f"{base}1/"),
    ]
    assert "/knowledge/" not in html

    passage = client.get(f"{base}1/")
    assert passage.status_code == 200
    text = passage.content.decode()
    assert "handbook.pdf" in text and "Page 4 · Holidays › Carry-over" in text
    assert "Unused days carry over to the next year." in text
    assert f'href="/s/{share.token}/"' in text  # back to the shared conversation
    assert passage["X-Robots-Tag"] == "noindex, nofollow"
    assert passage["Referrer-Policy"] == "no-referrer"


def test_only_the_cited_passages_are_copied_without_their_ids(chat):
    share = sharing.share_create(conversation=chat.conversation)

    assert share.snapshot["passages"] == [
        {"document": "handbook.pdf", "page": page, "heading": heading, "text": text}
        for page, heading, text in PASSAGES[:2]
    ]
    [run] = [item for item in share.snapshot["items"] if item["kind"] == "run"]
    assert [(s["number"], s["passage"]) for s in run["sources"]] == [(1, 0), (2, 1)]
    assert "chunk_id" not in json.dumps(share.snapshot["passages"] + run["sources"])
    [card] = run["cards"]  # the search's card, without the passages' ids
    assert card["observation"].startswith("[1] handbook.pdf, page 3, Holidays\nEveryone")
    assert "(chunk " not in json.dumps(share.snapshot)


def test_the_copy_outlives_changes_to_the_knowledge_base(client, chat):
    share = sharing.share_create(conversation=chat.conversation)
    Chunk.objects.filter(pk=chat.chunks[0].pk).update(text="Rewritten since.")
    KnowledgeBase.objects.filter(pk=chat.base.pk).delete()

    text = client.get(f"/s/{share.token}/passages/0/").content.decode()
    assert "Everyone gets 25 days of holiday a year." in text


def test_only_the_share_token_opens_the_copy(client, user, other_user, chat):
    share = sharing.share_create(conversation=chat.conversation)
    chunk = chat.chunks[0]

    client.force_login(other_user)
    assert client.get(f"/knowledge/passages/{chunk.pk}/").status_code == 404
    assert client.get(f"/s/{share.token}/passages/0/").status_code == 200
    assert client.get(f"/s/{share.token}/passages/2/").status_code == 404  # never copied
    assert client.get(f"/s/{share.token[:-1]}x/passages/0/").status_code == 404
    client.logout()
    assert client.get(f"/knowledge/passages/{chunk.pk}/").status_code in (302, 404)
    assert client.get(f"/s/{share.token}/passages/0/").status_code == 200


def test_a_revoked_share_serves_no_passage_and_no_file(client, chat):
    share = sharing.share_create(conversation=chat.conversation, include_files=True)
    urls = [
        sharing.share_url(share),
        f"/s/{share.token}/passages/0/",
        f"/s/{share.token}/files/0/",
        f"/s/{share.token}/files/1/",
    ]
    assert [client.get(url).status_code for url in urls] == [200, 200, 200, 200]

    sharing.share_revoke(share=share)

    assert [client.get(url).status_code for url in urls] == [404, 404, 404, 404]
    share.refresh_from_db()
    assert share.snapshot == {}


def test_a_passage_the_owner_can_no_longer_read_is_listed_but_not_copied(client, user, other_user):
    """The base was shared with the owner when the run searched it, and is not now."""
    chat = cited_chat(user, base_owner=other_user)
    KnowledgeBase.objects.filter(pk=chat.base.pk).update(shared_with_everyone=False)

    share = sharing.share_create(conversation=chat.conversation)
    html = _public_html(client, share)

    assert share.snapshot["passages"] == []
    assert _links(html) == []
    assert "You get 25 days a year [1];" in html
    assert html.count("the passage was no longer available when this was shared") == 2
    assert client.get(f"/s/{share.token}/passages/0/").status_code == 404


# ---------------------------------------------------------------------- attached files


def test_files_are_left_out_unless_the_owner_ticks_them(client, chat):
    share = sharing.share_create(conversation=chat.conversation)
    html = _public_html(client, share)

    assert "file-chip" not in html and "notes.txt" not in html and "chart.png" not in html
    assert "notes.txt" not in json.dumps(share.snapshot)
    assert client.get(f"/s/{share.token}/files/0/").status_code == 404


def test_ticked_files_show_as_chips_served_from_the_share(client, chat):
    share = sharing.share_create(conversation=chat.conversation, include_files=True)
    html = _public_html(client, share)
    files = f"/s/{share.token}/files/"

    chips = re.search(r'<ul class="file-chips" aria-label="Attached files">(.*?)</ul>', html)
    assert re.findall(r'<span class="file-name">([^<]+)</span>', chips.group(1)) == [
        "notes.txt",
        "chart.png",
    ]
    assert f'<a href="{files}0/" download' in html
    assert f'<img src="{files}1/" alt="" width="32" height="32" loading="lazy">' in html
    assert "/api/files/" not in html

    # The owner's bytes are gone: the copies remain.
    for stored in chat.files:
        stored.blob.storage.delete(stored.blob.name)
    text = client.get(f"{files}0/")
    assert text.content == NOTES
    assert text["Content-Type"] == "text/plain; charset=utf-8"
    assert text["Content-Disposition"] == 'attachment; filename="notes.txt"'
    assert text["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in text["Content-Security-Policy"]
    image = client.get(f"{files}1/")
    assert image.content == PNG and image["Content-Type"] == "image/png"
    assert image["Content-Disposition"] == 'inline; filename="chart.png"'
    assert client.get(f"{files}2/").status_code == 404


def test_files_over_the_limit_are_listed_but_not_copied(client, chat, settings):
    settings.AGENTSITE_SHARE_ARTIFACT_MAX_BYTES = len(NOTES)  # the notes fit, the image not
    share = sharing.share_create(conversation=chat.conversation, include_files=True)
    html = _public_html(client, share)

    assert "not shared: too large to share" in html
    assert client.get(f"/s/{share.token}/files/0/").status_code == 200
    assert client.get(f"/s/{share.token}/files/1/").status_code == 404


def test_files_and_artifacts_share_one_size_budget(chat, settings):
    settings.AGENTSITE_SHARE_ARTIFACTS_MAX_BYTES = len(NOTES) + len(PNG) - 1
    share = sharing.share_create(conversation=chat.conversation, include_files=True)
    omitted = [entry["omitted"] for entry in share.snapshot["files"]]
    assert omitted == ["", "over the size limit of a shared link"]


def test_the_share_form_and_the_settings_page_know_the_files_box(client, user, chat):
    client.force_login(user)
    client.post(f"/c/{chat.conversation.pk}/share/", {"include_files": "1"})
    client.post(f"/c/{chat.conversation.pk}/share/")
    ticked, plain = SharedLink.objects.order_by("pk")
    assert ticked.include_files and not plain.include_files

    html = client.get("/settings/shares/").content.decode()
    assert "<th>Files</th>" in html
    assert re.search(rf'id="share-{ticked.pk}".*?<td>no</td>\s*<td>included</td>', html, re.S)
