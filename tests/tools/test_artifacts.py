"""Artifacts: storage quotas, persistence from tool results, owner-only sandboxed previews."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.template.loader import render_to_string
from django.urls import reverse

import engine
from conversations.models import Conversation, Run
from core.errors import ApplicationError
from tests.csp import parse_policy
from tools.artifacts import (
    artifact_persist_results,
    artifact_save,
    artifacts_for_run,
    persist_artifacts,
)
from tools.builtin.python_exec import build as build_python
from tools.models import Artifact
from tools.registry import ToolContext

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.tools.urls")]

HTML = b"<h1>Report</h1><script>parent.document.title = 'pwned'</script>"
MARKDOWN = b"# Title\n\n<script>alert(1)</script>\n\n[x](javascript:alert(2)) **bold**"


@pytest.fixture
def conversation(user):
    return Conversation.objects.create(owner=user, title="c")


@pytest.fixture
def run(conversation):
    return Run.objects.create(conversation=conversation)


def _save(conversation, run, name, content, mime):
    return artifact_save(
        conversation_id=conversation.pk,
        run_id=run.pk if run else None,
        tool_name="python",
        artifact=engine.Artifact(name, mime, len(content), None, content),
    )


def test_save_stores_file_under_the_conversation(media_root, conversation, run):
    row = _save(conversation, run, "report.html", HTML, "text/html")
    assert row.size == len(HTML) and row.kind == "html" and row.tool_name == "python"
    assert row.file.name.startswith(f"artifacts/{conversation.pk}/")
    assert row.file.name.endswith("/report.html")
    assert (media_root / row.file.name).read_bytes() == HTML
    assert list(artifacts_for_run(run.pk)) == [row]


def test_save_from_a_path_and_hostile_names(media_root, conversation, tmp_path):
    path = tmp_path / "data.csv"
    path.write_bytes(b"a,b\n")
    row = artifact_save(
        conversation_id=conversation.pk,
        run_id=None,
        tool_name="t",
        artifact=engine.Artifact("../../etc/passwd", "", 4, str(path)),
    )
    assert ".." not in row.file.name and row.file.name.startswith(f"artifacts/{conversation.pk}/")
    assert row.mime_type == "application/octet-stream"


def test_file_and_conversation_quotas(media_root, conversation, run, settings):
    settings.ARTIFACT_MAX_BYTES = 1000
    settings.ARTIFACT_CONVERSATION_MAX_BYTES = 2500
    with pytest.raises(ApplicationError, match="limit is 1,000 bytes"):
        _save(conversation, run, "big.bin", b"x" * 1001, "application/octet-stream")
    _save(conversation, run, "a.bin", b"x" * 1000, "application/octet-stream")
    _save(conversation, run, "b.bin", b"x" * 1000, "application/octet-stream")
    with pytest.raises(ApplicationError, match="would exceed"):
        _save(conversation, run, "c.bin", b"x" * 600, "application/octet-stream")
    assert Artifact.objects.count() == 2
    assert len(list((media_root / "artifacts" / str(conversation.pk)).iterdir())) == 2


def test_default_limits_are_10_and_50_mb():
    from agentsite import settings as defaults  # the module: no test's override

    assert defaults.ARTIFACT_MAX_BYTES == 10 * 1024 * 1024
    assert defaults.ARTIFACT_CONVERSATION_MAX_BYTES == 50 * 1024 * 1024


def test_persist_results_drops_over_quota_artifacts_with_a_note(
    media_root, conversation, run, settings
):
    settings.ARTIFACT_MAX_BYTES = 100
    context = ToolContext(conversation_id=conversation.pk, run_id=run.pk)
    result = engine.ToolResult(
        "<p>x</p>",
        "html",
        [
            engine.Artifact("ok.html", "text/html", 8, None, b"<p>x</p>"),
            engine.Artifact("huge.html", "text/html", 500, None, b"y" * 500),
        ],
    )
    saved = artifact_persist_results(context, result, tool_name="report")
    assert [a.name for a in saved.artifacts] == ["ok.html"]
    assert "huge.html" in saved.content and "limit" in saved.content
    assert Artifact.objects.get().name == "ok.html"
    # without a conversation nothing is stored
    untouched = artifact_persist_results(ToolContext(), result, tool_name="report")
    assert untouched is result


def test_deleting_the_conversation_deletes_files(media_root, conversation, run):
    row = _save(conversation, run, "a.md", MARKDOWN, "text/markdown")
    path = media_root / row.file.name
    assert path.exists()
    conversation.delete()
    assert not path.exists()


@pytest.mark.django_db(transaction=True)
async def test_python_tool_files_are_saved_for_the_run(media_root, user):
    conversation = await Conversation.objects.acreate(owner=user)
    run = await Run.objects.acreate(conversation=conversation)
    context = ToolContext(user_id=user.pk, conversation_id=conversation.pk, run_id=run.pk)
    (tool,) = build_python({"cpu_seconds": 2}, context)
    result = await tool.invoke({"code": "open('chart.svg', 'w').write('<svg/>')\nprint('ok')"})
    assert not result.is_error and "[Artifact generated: chart.svg]" in result.observation()
    rows = await sync_to_async(lambda: list(artifacts_for_run(run.pk)))()
    assert [(r.name, r.mime_type, r.tool_name) for r in rows] == [
        ("chart.svg", "image/svg+xml", "python")
    ]


async def test_persist_wrapper_leaves_tools_alone_without_a_conversation():
    @engine.tool()
    def echo(text: str) -> str:
        """Echo."""
        return text

    (same,) = persist_artifacts([echo], ToolContext())
    assert same is echo


# --- views ------------------------------------------------------------------------------


def test_preview_of_html_is_sandboxed(media_root, conversation, run, user_client):
    row = _save(conversation, run, "report.html", HTML, "text/html")
    response = user_client.get(reverse("artifact_preview", args=[row.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/html; charset=utf-8"
    policy = parse_policy(response["Content-Security-Policy"])
    assert policy["sandbox"] == []  # no allow-scripts, no allow-same-origin
    assert policy["default-src"] == ["'none'"] and policy["img-src"] == ["data:"]
    assert policy["style-src"] == ["'self'"]  # no 'unsafe-inline': as strict as the site
    assert policy["frame-ancestors"] == ["'self'"]  # the chat page's iframe
    assert policy["base-uri"] == policy["form-action"] == ["'none'"]
    assert "script-src" not in policy and "connect-src" not in policy  # default-src 'none'
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "SAMEORIGIN"  # framable by the chat page only
    assert b"<h1>Report</h1>" in response.content


def test_preview_of_markdown_is_rendered_and_sanitised(media_root, conversation, run, user_client):
    row = _save(conversation, run, "notes.md", MARKDOWN, "text/markdown")
    response = user_client.get(reverse("artifact_preview", args=[row.pk]))
    body = response.content.decode()
    assert response.status_code == 200 and "<h1>Title</h1>" in body
    assert "<strong>bold</strong>" in body
    assert "<script>" not in body and 'href="javascript:' not in body
    assert "<style" not in body and "/static/css/artifact.css" in body  # no inline style
    assert "sandbox" in parse_policy(response["Content-Security-Policy"])


def test_svg_is_never_rendered_as_an_image(media_root, conversation, run, user_client):
    row = _save(conversation, run, "x.svg", b"<svg onload='alert(1)'/>", "image/svg+xml")
    response = user_client.get(reverse("artifact_preview", args=[row.pk]))
    assert response["Content-Type"].startswith("text/plain")
    png = _save(conversation, run, "x.png", b"\x89PNG\r\n\x1a\n", "image/png")
    assert (
        user_client.get(reverse("artifact_preview", args=[png.pk]))["Content-Type"] == "image/png"
    )
    binary = _save(conversation, run, "x.bin", b"\0", "application/octet-stream")
    assert user_client.get(reverse("artifact_preview", args=[binary.pk])).status_code == 404


def test_download_is_an_attachment(media_root, conversation, run, user_client):
    row = _save(conversation, run, "report.html", HTML, "text/html")
    response = user_client.get(reverse("artifact_download", args=[row.pk]))
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="report.html"'
    policy = parse_policy(response["Content-Security-Policy"])
    assert policy["sandbox"] == [] and policy["frame-ancestors"] == ["'none'"]
    assert b"".join(response.streaming_content) == HTML
    assert response["X-Frame-Options"] == "DENY"


@pytest.mark.parametrize("view", ["artifact_preview", "artifact_download"])
def test_only_the_owner_can_see_artifacts(media_root, conversation, run, client, other_user, view):
    row = _save(conversation, run, "report.html", HTML, "text/html")
    url = reverse(view, args=[row.pk])
    anonymous = client.get(url)
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]
    client.force_login(other_user)
    assert client.get(url).status_code == 404
    assert client.get(reverse(view, args=[row.pk + 1000])).status_code == 404
    assert client.post(url).status_code in (404, 405)


def test_preview_partial(media_root, conversation, run):
    html = _save(conversation, run, "report.html", HTML, "text/html")
    md = _save(conversation, run, "notes.md", MARKDOWN, "text/markdown")
    png = _save(conversation, run, "plot.png", b"\x89PNG", "image/png")

    frame = render_to_string("tools/artifact_preview.html", {"artifact": html})
    assert 'sandbox=""' in frame and "allow-" not in frame
    assert reverse("artifact_preview", args=[html.pk]) in frame
    assert reverse("artifact_download", args=[html.pk]) in frame
    assert "<script" not in frame  # the document is only ever loaded into the frame

    inline = render_to_string("tools/artifact_preview.html", {"artifact": md})
    assert "<h1>Title</h1>" in inline and "<script" not in inline and "<iframe" not in inline

    image = render_to_string("tools/artifact_preview.html", {"artifact": png})
    assert "<img" in image and "<iframe" not in image
