"""Shared links: a snapshot of the selected branch, public by token, revocable."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

import engine
from conversations import services
from conversations.models import Run, SharedLink
from conversations.transfer import sharing
from tests.conversations.branches.trees import build_tree, tool_events
from tools.artifacts import artifact_save

pytestmark = pytest.mark.django_db

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


@pytest.fixture
def tree(user):
    return build_tree(user)


def _public(client, share: SharedLink):
    client.logout()
    return client.get(sharing.share_url(share))


def test_the_public_page_shows_the_snapshot_to_a_logged_out_browser(client, tree):
    share = sharing.share_create(conversation=tree.conversation)

    response = _public(client, share)

    assert response.status_code == 200
    html = response.content.decode()
    assert "Trip plan" in html
    assert "What is 17*3?" in html and "Answer one" in html
    # The answer rendered as the chat renders it; its tool card with arguments and result.
    assert "New answer two: <strong>because</strong>." in html
    assert 'class="tool-card ok"' in html and "calculator" in html
    assert "&quot;expression&quot;: &quot;17*3&quot;" in html
    # Only the selected branch.
    assert "Old answer two" not in html and "Answer to the edit" not in html
    # Not indexable.
    assert response["X-Robots-Tag"] == "noindex, nofollow"
    assert '<meta name="robots" content="noindex">' in html
    assert response["Referrer-Policy"] == "no-referrer"


def test_the_public_page_exposes_nothing_else_of_the_owner(client, user, tree):
    share = sharing.share_create(conversation=tree.conversation)
    html = _public(client, share).content.decode()

    assert user.username not in html
    assert not re.search(r'href="/(c|runs|m|artifacts|api|settings)/', html)
    assert "ws-connect" not in html and "/ws/" not in html
    assert "chat.js" not in html
    for run in tree.runs.values():  # no ids of the owner's rows either
        assert f"run-{run.pk}" not in html and f"answer-{run.pk}" not in html


def test_later_messages_do_not_appear(client, user, tree):
    share = sharing.share_create(conversation=tree.conversation)
    services.message_create(conversation=tree.conversation, role="user", content="A later question")
    tree.conversation.title = "Renamed later"
    tree.conversation.save()

    html = _public(client, share).content.decode()

    assert "A later question" not in html
    assert "Renamed later" not in html and "Trip plan" in html


def test_revoked_and_unknown_tokens_are_404(client, user, tree):
    share = sharing.share_create(conversation=tree.conversation)
    client.force_login(user)
    response = client.post(f"/settings/shares/{share.pk}/revoke/", follow=True)
    assert "revoked" in response.content.decode()
    share.refresh_from_db()
    assert share.revoked_at is not None and share.snapshot == {}

    assert _public(client, share).status_code == 404
    assert client.get("/s/not-a-token/").status_code == 404
    assert client.get("/s/" + "x" * 80 + "/").status_code == 404


def test_a_deactivated_owners_links_stop_answering(client, user, tree):
    """An administrator deactivated the account: what it shared goes dark with it (and
    answers again if the account is reactivated), like the API tokens it made."""
    share = sharing.share_create(conversation=tree.conversation)
    assert _public(client, share).status_code == 200

    type(user).objects.filter(pk=user.pk).update(is_active=False)
    assert _public(client, share).status_code == 404

    type(user).objects.filter(pk=user.pk).update(is_active=True)
    assert _public(client, share).status_code == 200


def test_the_settings_page_lists_links_with_revoke_buttons(client, user, tree):
    live = sharing.share_create(conversation=tree.conversation)
    gone = sharing.share_revoke(share=sharing.share_create(conversation=tree.conversation))
    client.force_login(user)

    html = client.get("/settings/shares/").content.decode()

    assert f"http://testserver/s/{live.token}/" in html
    assert gone.token not in html
    assert html.count("Revoke</button>") == 1
    assert 'href="/settings/shares/"' in html  # the top navigation links here


def test_sharing_from_the_page_creates_a_link(client, user, tree):
    client.force_login(user)
    response = client.post(f"/c/{tree.conversation.pk}/share/")
    share = SharedLink.objects.get(conversation=tree.conversation)
    assert response["Location"] == f"/settings/shares/#share-{share.pk}"
    assert share.owner == user and not share.include_artifacts
    assert len(share.token) >= 43


def test_another_users_conversation_cannot_be_shared_nor_its_links_revoked(
    client, other_user, tree
):
    share = sharing.share_create(conversation=tree.conversation)
    client.force_login(other_user)

    assert client.post(f"/c/{tree.conversation.pk}/share/").status_code == 404
    assert client.post(f"/settings/shares/{share.pk}/revoke/").status_code == 404
    assert share.token not in client.get("/settings/shares/").content.decode()
    assert SharedLink.objects.count() == 1
    share.refresh_from_db()
    assert share.is_active


# ---------------------------------------------------------------------- artifacts


@pytest.fixture
def with_artifacts(tree, settings, tmp_path):
    """The regenerated answer's run made a markdown report and a PNG chart."""
    settings.MEDIA_ROOT = str(tmp_path)
    run = tree.runs["r3"]
    saved = [
        artifact_save(
            conversation_id=tree.conversation.pk,
            run_id=run.pk,
            tool_name="python",
            artifact=engine.Artifact(name=name, mime_type=mime, size=len(data), content=data),
        )
        for name, mime, data in (
            ("report.md", "text/markdown", b"# Findings\n\n*all good*"),
            ("chart.png", "image/png", PNG),
        )
    ]
    tool_events(run, {"code": "plot()"}, "[Artifact generated: report.md, chart.png]", "python")
    return saved


def test_artifacts_are_shown_only_when_the_owner_ticks_it(client, tree, with_artifacts):
    without = sharing.share_create(conversation=tree.conversation)
    html = _public(client, without).content.decode()
    assert "artifact__name" not in html and "Findings" not in html
    assert client.get(f"/s/{without.token}/artifacts/0/preview/").status_code == 404

    shared = sharing.share_create(conversation=tree.conversation, include_artifacts=True)
    html = _public(client, shared).content.decode()
    names = re.findall(r'class="artifact__name">([^<]+)<', html)
    assert names == ["report.md", "chart.png"]
    assert "<h1>Findings</h1>" in html  # markdown rendered, sanitised, in the page
    assert f'src="/s/{shared.token}/artifacts/1/preview/"' in html


def test_shared_artifacts_are_copies_the_public_page_serves_itself(client, tree, with_artifacts):
    shared = sharing.share_create(conversation=tree.conversation, include_artifacts=True)
    for artifact in with_artifacts:  # the owner's files are gone: the copies remain
        artifact.delete()

    image = client.get(f"/s/{shared.token}/artifacts/1/preview/")
    assert image.status_code == 200 and image["Content-Type"] == "image/png"
    assert image.content == PNG
    assert "sandbox" in image["Content-Security-Policy"]
    download = client.get(f"/s/{shared.token}/artifacts/0/download/")
    assert download["Content-Disposition"] == 'attachment; filename="report.md"'
    assert download.content == b"# Findings\n\n*all good*"
    assert client.get(f"/s/{shared.token}/artifacts/9/preview/").status_code == 404

    sharing.share_revoke(share=shared)
    assert client.get(f"/s/{shared.token}/artifacts/1/preview/").status_code == 404


def test_too_large_artifacts_are_listed_but_not_copied(client, tree, with_artifacts, settings):
    settings.AGENTSITE_SHARE_ARTIFACT_MAX_BYTES = 30  # the report fits, the chart does not
    shared = sharing.share_create(conversation=tree.conversation, include_artifacts=True)
    html = _public(client, shared).content.decode()
    assert "Not shared: too large to share." in html
    assert client.get(f"/s/{shared.token}/artifacts/1/preview/").status_code == 404


def test_the_admin_lists_links_without_their_tokens(client, staff_user, tree):
    share = sharing.share_create(conversation=tree.conversation)
    client.force_login(staff_user)
    listing = client.get("/admin/conversations/sharedlink/")
    change = client.get(f"/admin/conversations/sharedlink/{share.pk}/change/")
    assert listing.status_code == change.status_code == 200
    assert "Trip plan" in listing.content.decode()
    assert share.token not in listing.content.decode() + change.content.decode()
    assert 'name="revoked_at_0"' in change.content.decode()  # an admin may revoke it


def test_a_shared_tool_card_shows_code_arguments_as_code(client, user):
    conversation = services.conversation_create(owner=user, title="Code")
    question = services.message_create(conversation=conversation, role="user", content="Run it")
    run = Run.objects.create(
        conversation=conversation,
        trigger_message=question,
        status=Run.Status.SUCCEEDED,
        finished_at=timezone.now(),
    )
    code = 'total = 0\nfor n in range(3):\n    total += n\nprint(f"{total} done")'
    tool_events(run, {"code": code, "timeout": 5}, "3 done", tool="python")
    services.message_create(conversation=conversation, role="assistant", content="3.", run=run)

    html = _public(client, sharing.share_create(conversation=conversation)).content.decode()

    assert '<code class="language-python">total = 0\nfor n in range(3):' in html
    assert "print(f&quot;{total} done&quot;)</code>" in html
    assert "&quot;timeout&quot;: 5" in html and "\\n" not in html.split("tool-args")[1][:200]
