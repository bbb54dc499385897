"""Files attached to a message reach the model (issue 45): small text inline, long text
through the read_file tool, images as image parts to a model with vision, and a refusal
before anything is saved when the model cannot see them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.core.files.base import ContentFile

from conversations import services
from conversations.models import Message, MessageFile, Run
from core.errors import ApplicationError
from files.models import StoredFile
from tests.conversations.running import execute

pytestmark = pytest.mark.django_db(transaction=True)

# An 8x8 red PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d494844520000000800000008080200000"
    "04b6d29dc0000001549444154789c63f8cfc0f09f0115c0c4401a0000"
    "f7f10fc17d8f3e5b0000000049454e44ae426082"
)


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def stored(owner, name: str, *, text: str = "", data: bytes | None = None, kind: str = "text"):
    data = data if data is not None else text.encode()
    return StoredFile.objects.create(
        owner=owner,
        name=name,
        kind=kind,
        content_type="image/png" if kind == "image" else "text/plain",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        blob=ContentFile(data, name="blob"),
        text=text,
    )


def user_content(request) -> object:
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


def post(conversation, user, content, files):
    return services.message_post(
        conversation=conversation, user=user, content=content, file_ids=[f.pk for f in files]
    )


async def test_a_small_text_file_goes_inline_after_the_question(
    user, chat_model, llm_server, no_launch
) -> None:
    llm_server.push("It lists three fruits.")
    notes = await sync_to_async(stored)(user, "fruit.md", text="- apple\n- pear\n- fig")
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    message, run, _ = await sync_to_async(post)(conversation, user, "What is in it?", [notes])

    assert await execute(run.pk) == Run.Status.SUCCEEDED
    content = user_content(llm_server.requests[-1])
    assert content.startswith("What is in it?")
    assert (
        f'<file name="fruit.md" file_id="{notes.pk}">\n- apple\n- pear\n- fig\n</file>' in content
    )
    assert await MessageFile.objects.filter(message=message, file=notes).aexists()


async def test_a_long_file_is_read_with_the_read_file_tool(
    user, chat_model, llm_server, no_launch, settings
) -> None:
    settings.AGENTSITE_FILE_INLINE_CHARS = 100
    report = "".join(f"Line {n}: nothing to see.\n" for n in range(200)) + "The code is 4711.\n"
    big = await sync_to_async(stored)(user, "report.txt", text=report)
    llm_server.push(
        {
            "tool_calls": [
                {
                    "name": "read_file",
                    "arguments": {"file_id": big.pk, "offset": len(report) - 40, "limit": 100},
                }
            ]
        },
        "The code is 4711.",
    )
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "What is the code?", [big])

    assert await execute(run.pk) == Run.Status.SUCCEEDED
    first = llm_server.requests[0]
    assert "read_file" in [tool["function"]["name"] for tool in first["tools"]]
    content = user_content(first)
    assert "Line 199" not in content  # not inlined
    assert f'file_id="{big.pk}" characters="{len(report)}"' in content
    tool_result = [m for m in llm_server.requests[1]["messages"] if m["role"] == "tool"][-1]
    assert "The code is 4711." in tool_result["content"]
    assert f"characters {len(report) - 40}-{len(report)} of {len(report)}" in tool_result["content"]


async def test_read_file_cannot_read_another_users_file(
    user, other_user, chat_model, llm_server, no_launch, settings
) -> None:
    settings.AGENTSITE_FILE_INLINE_CHARS = 10
    mine = await sync_to_async(stored)(user, "mine.txt", text="x" * 50)
    theirs = await sync_to_async(stored)(other_user, "theirs.txt", text="secret " * 20)
    llm_server.push(
        {"tool_calls": [{"name": "read_file", "arguments": {"file_id": theirs.pk}}]},
        "I cannot read it.",
    )
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "Read file", [mine])

    assert await execute(run.pk) == Run.Status.SUCCEEDED
    tool_result = [m for m in llm_server.requests[1]["messages"] if m["role"] == "tool"][-1]
    assert "secret" not in tool_result["content"]
    assert f"no file {theirs.pk} in this conversation" in tool_result["content"]


async def test_an_image_goes_to_a_vision_model_as_an_image_part(
    user, chat_model, llm_server, no_launch
) -> None:
    chat_model.abilities = {**chat_model.abilities, "vision": True}
    await chat_model.asave(update_fields=["abilities"])
    llm_server.push("A red square.")
    image = await sync_to_async(stored)(user, "red.png", data=PNG, kind="image")
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "What is this?", [image])

    assert await execute(run.pk) == Run.Status.SUCCEEDED
    parts = user_content(llm_server.requests[-1])
    assert isinstance(parts, list)
    assert parts[0]["type"] == "text" and parts[0]["text"].startswith("What is this?")
    url = parts[1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,iVBORw0KGgo")


def test_a_model_without_vision_refuses_an_image_and_saves_nothing(user, chat_model) -> None:
    image = stored(user, "red.png", data=PNG, kind="image")
    conversation = services.conversation_create(owner=user)
    with pytest.raises(ApplicationError) as refused:
        post(conversation, user, "What is this?", [image])
    assert "cannot read images" in refused.value.message
    assert "red.png" in refused.value.extra["files"][0]
    assert not Message.objects.filter(conversation=conversation).exists()
    assert not Run.objects.filter(conversation=conversation).exists()


def test_another_users_file_or_too_many_files_are_refused(
    user, other_user, chat_model, settings
) -> None:
    theirs = stored(other_user, "theirs.txt", text="hello")
    conversation = services.conversation_create(owner=user)
    with pytest.raises(ApplicationError) as refused:
        post(conversation, user, "Read this", [theirs])
    assert f"No file {theirs.pk} of yours" in refused.value.message

    settings.AGENTSITE_MESSAGE_MAX_FILES = 2
    mine = [stored(user, f"{n}.txt", text="x") for n in range(3)]
    with pytest.raises(ApplicationError) as refused:
        post(conversation, user, "Read these", mine)
    assert "At most 2 files" in refused.value.message
    assert not Message.objects.filter(conversation=conversation).exists()


def test_files_cannot_join_a_run_as_a_follow_up(user, chat_model, no_launch) -> None:
    conversation = services.conversation_create(owner=user)
    post(conversation, user, "First question", [])
    notes = stored(user, "notes.txt", text="later")
    with pytest.raises(ApplicationError) as refused:
        post(conversation, user, "And this file", [notes])
    assert refused.value.code == "conflict"
    assert Message.objects.filter(conversation=conversation).count() == 1


def test_the_api_takes_files_with_a_message(user, chat_model, no_launch, client) -> None:
    client.force_login(user)
    notes = stored(user, "notes.txt", text="hello")
    conversation = services.conversation_create(owner=user)
    response = client.post(
        f"/api/conversations/{conversation.pk}/messages",
        {"content": "Read it", "files": [notes.pk]},
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    message = Message.objects.get(pk=response.json()["message_id"])
    assert list(message.files.all()) == [notes]

    image = stored(user, "red.png", data=PNG, kind="image")
    other = services.conversation_create(owner=user)
    refused = client.post(
        f"/api/conversations/{other.pk}/messages",
        {"content": "See it", "files": [image.pk]},
        content_type="application/json",
    )
    assert refused.status_code == 400
    assert "cannot read images" in refused.json()["fields"]["files"][0]


def test_the_chat_page_and_exports_show_the_files_as_references(
    user, chat_model, no_launch, client
) -> None:
    client.force_login(user)
    notes = stored(user, "notes <1>.txt", text="hello")
    conversation = services.conversation_create(owner=user)
    post(conversation, user, "Read it", [notes])

    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert f'href="/api/files/{notes.pk}/content"' in page
    assert "notes &lt;1&gt;.txt" in page  # escaped

    exported = client.get(f"/api/conversations/{conversation.pk}/export?format=json").json()
    [question] = [m for m in exported["messages"] if m["role"] == "user"]
    assert question["files"] == [{"name": "notes <1>.txt", "size": 5, "content_type": "text/plain"}]
    markdown = client.get(f"/api/conversations/{conversation.pk}/export?format=markdown")
    assert "*Attached: notes <1>.txt (5\xa0bytes)*" in markdown.content.decode()


def test_deleting_a_conversation_deletes_its_files_but_not_those_another_holds(
    user, chat_model, no_launch
) -> None:
    only_here = stored(user, "only-here.txt", text="a")
    shared = stored(user, "shared.txt", text="b")
    first = services.conversation_create(owner=user)
    post(first, user, "Both", [only_here, shared])
    second = services.conversation_create(owner=user)
    post(second, user, "Again", [shared])
    blob = only_here.blob.path

    services.conversation_delete(conversation=first)
    assert not StoredFile.objects.filter(pk=only_here.pk).exists()
    assert StoredFile.objects.filter(pk=shared.pk).exists()
    assert not Path(blob).exists()  # the blob goes once the deletion committed
