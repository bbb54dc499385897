"""A tool's HTML artifact: stored for the conversation, previewed from its card, owner only."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from conversations import services
from conversations.models import RunEvent
from engine import Artifact, Tool, ToolResult
from tests.conversations.running import execute
from tools.artifacts import persist_artifacts
from tools.registry import ToolSpec, register

pytestmark = pytest.mark.django_db(transaction=True)

REPORT = b"<h1>Report</h1><script>parent.document.title='pwned'</script>"


def _report() -> ToolResult:
    artifact = Artifact(name="report.html", mime_type="text/html", size=len(REPORT), content=REPORT)
    return ToolResult("<h1>Report</h1>", content_type="html", artifacts=[artifact])


register(
    ToolSpec(
        name="make_report",
        description="Writes an HTML report (test tool).",
        build=lambda config, context: persist_artifacts(
            [Tool("make_report", "Writes an HTML report.", {"type": "object"}, _report)], context
        ),
    )
)


@pytest.fixture(autouse=True)
def no_launch(monkeypatch):
    monkeypatch.setattr("conversations.runs.launcher.launch", lambda run_id: None)


async def test_artifact_preview_reachable_from_card_only_by_owner(
    user, other_user, chat_model, llm_server, client
):
    llm_server.push(
        {"tool_calls": [{"name": "make_report", "arguments": {}}]}, "Made it.", "Here it is."
    )
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="report please"
    )
    assert await execute(run.pk) == "succeeded"

    done = await RunEvent.objects.filter(
        run=run, channel="step", payload__status="done", payload__type="iteration"
    ).aget()
    assert done.payload["observation"].startswith("[Artifact generated: report.html]")
    tool_message = llm_server.requests[1]["messages"][-1]["content"]
    assert "<h1>" not in tool_message  # the model sees only the summary

    await sync_to_async(client.force_login)(user)
    page = (await sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    assert f"/runs/{run.pk}/artifacts/?tool=make_report&amp;name=report.html" in page
    previews = await sync_to_async(client.get)(
        f"/runs/{run.pk}/artifacts/?tool=make_report&name=report.html"
    )
    html = previews.content.decode()
    assert 'sandbox=""' in html and "report.html" in html
    preview_url = html.split('src="')[1].split('"')[0]
    preview = await sync_to_async(client.get)(preview_url)
    assert preview.status_code == 200
    assert "sandbox" in preview["Content-Security-Policy"]

    await sync_to_async(client.force_login)(other_user)
    assert (await sync_to_async(client.get)(preview_url)).status_code == 404
    assert (
        await sync_to_async(client.get)(f"/runs/{run.pk}/artifacts/?tool=make_report")
    ).status_code == 404
