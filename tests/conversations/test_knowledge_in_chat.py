"""Knowledge bases in a conversation (issue 45): attached through the API, searched by
the agent's search_knowledge tool within what the owner may read, and cited answers
whose sources open the passage, after a reload and in an export."""

from __future__ import annotations

import hashlib

import pytest
from asgiref.sync import sync_to_async
from django.core.files.base import ContentFile

from conversations import services
from conversations.models import Run
from files.models import StoredFile
from knowledge import services as knowledge_services
from knowledge.models import Chunk, Document, KnowledgeBase
from tests.conversations.running import execute

pytestmark = pytest.mark.django_db(transaction=True)

PASSAGE = "Everyone gets 25 days of holiday a year; unused days carry over."


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def handbook(owner) -> tuple[int, int]:
    """A base with one indexed passage (rows as indexing leaves them): (base, chunk)."""
    base = knowledge_services.base_create(owner, "Handbook")
    data = PASSAGE.encode()
    stored = StoredFile.objects.create(
        owner=owner,
        name="handbook.pdf",
        kind="pdf",
        content_type="application/pdf",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        blob=ContentFile(data, name="blob"),
        text=PASSAGE,
        pages=[0],
    )
    document = Document.objects.create(
        base=base, file=stored, name="handbook.pdf", status=Document.Status.READY, chunk_count=1
    )
    chunk = Chunk.objects.create(
        document=document, position=0, page=3, heading="Holidays", text=PASSAGE
    )
    return base.pk, chunk.pk


def test_attaching_a_base_checks_who_may_read_it(user, other_user, chat_model, client) -> None:
    client.force_login(user)
    mine, _ = handbook(user)
    theirs, _ = handbook(other_user)
    conversation = services.conversation_create(owner=user)
    url = f"/api/conversations/{conversation.pk}"

    refused = client.patch(url, {"knowledge": [mine, theirs]}, content_type="application/json")
    assert refused.status_code == 400
    message = f"No knowledge base {theirs} that you may read."
    assert refused.json()["fields"]["knowledge"] == [message]
    assert not conversation.knowledge.exists()

    attached = client.patch(url, {"knowledge": [mine]}, content_type="application/json")
    assert attached.status_code == 200
    assert attached.json()["knowledge"] == [{"id": mine, "name": "Handbook"}]
    detached = client.patch(url, {"knowledge": []}, content_type="application/json")
    assert detached.json()["knowledge"] == []


async def test_the_agent_searches_and_the_answer_cites_the_passage(
    user, other_user, chat_model, llm_server, no_launch, client
) -> None:
    base_id, chunk_id = await sync_to_async(handbook)(user)
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    await sync_to_async(services.conversation_set_knowledge)(
        conversation=conversation, user=user, base_ids=[base_id]
    )
    llm_server.push(
        {"tool_calls": [{"name": "search_knowledge", "arguments": {"query": "holiday days"}}]},
        "You get 25 days a year [1].",
    )
    _, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="How much holiday do I get?"
    )
    assert await execute(run.pk) == Run.Status.SUCCEEDED

    first = llm_server.requests[0]
    tools = {tool["function"]["name"]: tool["function"] for tool in first["tools"]}
    assert "Handbook" in tools["search_knowledge"]["description"]
    result = [m for m in llm_server.requests[1]["messages"] if m["role"] == "tool"][-1]
    assert result["content"].startswith(
        f"[1] handbook.pdf, page 3, Holidays (chunk {chunk_id})\n{PASSAGE}"
    )

    await sync_to_async(client.force_login)(user)
    page = (await sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    assert f'<li value="1"><a href="/knowledge/passages/{chunk_id}/"' in page
    passage = await sync_to_async(client.get)(f"/knowledge/passages/{chunk_id}/")
    assert passage.status_code == 200 and "unused days carry over" in passage.content.decode()
    exported = await sync_to_async(client.get)(
        f"/api/conversations/{conversation.pk}/export?format=markdown"
    )
    markdown = exported.content.decode()
    assert "You get 25 days a year [1].\n\n**Sources**\n\n[1] handbook.pdf, page 3, Holidays" in (
        markdown
    )

    await sync_to_async(client.force_login)(other_user)
    stranger = await sync_to_async(client.get)(f"/knowledge/passages/{chunk_id}/")
    assert stranger.status_code == 404


async def test_a_base_unshared_after_it_was_attached_is_not_searched(
    user, other_user, chat_model, llm_server, no_launch
) -> None:
    base_id, _ = await sync_to_async(handbook)(other_user)
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    # Attached while it was readable (shared with everyone), then unshared.
    await KnowledgeBase.objects.filter(pk=base_id).aupdate(shared_with_everyone=True)
    await sync_to_async(services.conversation_set_knowledge)(
        conversation=conversation, user=user, base_ids=[base_id]
    )
    await KnowledgeBase.objects.filter(pk=base_id).aupdate(shared_with_everyone=False)
    llm_server.push("I have nothing to search.")
    _, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="Holidays?"
    )
    assert await execute(run.pk) == Run.Status.SUCCEEDED
    offered = [tool["function"]["name"] for tool in llm_server.requests[0].get("tools", [])]
    assert "search_knowledge" not in offered
