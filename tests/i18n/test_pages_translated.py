"""Every page of ours, rendered in Simplified Chinese and in Japanese, holds no English
string of ours: a string never marked for translation, or one whose translation is
missing, fails here with the text it was found in."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib import admin
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, RequestFactory
from django.utils import translation

from conversations import presets, services, user_settings
from conversations.http.tokens import token_create
from conversations.models import Run
from conversations.organise import folders, pins, tags
from conversations.transfer.sharing import share_create
from knowledge import services as knowledge_services
from llms.models import LLMModel
from tests.conversations.running import execute
from tests.i18n.untranslated import django_untranslated, english_left, kept_words
from tools.registry import all_specs

pytestmark = [pytest.mark.django_db(transaction=True)]

LANGUAGES = ["zh-hans", "ja"]
OUR_APPS = {"conversations", "llms", "tools", "knowledge", "files", "audit", "core"}
# Words of the test's own data, of the product and of the keyboard, in any language;
# the names of the event protocol and of model abilities (the admin's raw views show
# them as the API names them); "UTC"; django-axes' models (it has no Chinese or Japanese).
DATA_WORDS = {
    "agentsite", "alice", "admin", "scripted", "english", "esc", "enter", "shift", "utc",
    "step", "answer", "done", "error", "streaming", "vision",
    "axes", "access", "attempts", "failures", "logs",
}  # fmt: skip


@pytest.fixture
def no_launch(monkeypatch):
    monkeypatch.setattr("conversations.runs.launcher.launch", lambda run_id: None)


def allowed_words() -> set[str]:
    tool_words = {part for spec in all_specs() for part in spec.name.split("_")}
    return kept_words() | DATA_WORDS | tool_words


def build_data(user: Any, llm_server: Any) -> dict[str, Any]:
    """A chat with a tool call and a failed answer, a knowledge base, a preset, a share, a
    token, a folder and a tag: each page shows its full set of words. All text is CJK."""
    LLMModel.objects.update(model_id="scripted")  # an id of one word: the data's
    group = Group.objects.create(name="团队")
    user.groups.add(group)
    conversation = services.conversation_create(owner=user, title="会话")
    base = knowledge_services.base_create(user, "手册", "说明")
    knowledge_services.document_add(
        base, SimpleUploadedFile("手册.txt", "假期二十五天。".encode(), "text/plain")
    )
    preset = presets.preset_create(
        user, {"name": "助手", "starters": ["你好"], "groups": [group.pk]}
    )
    folder = folders.folder_create(owner=user, name="文件夹")
    folders.conversation_move(conversation=conversation, folder_id=folder.pk)
    tags.conversation_set_tags(conversation=conversation, names=["标签"])
    pins.conversation_pin(conversation=conversation, pinned=True)
    token_create(user=user, name="令牌")
    user_settings.settings_update(user, instructions="请简短。")
    return {"conversation": conversation, "base": base, "preset": preset}


async def chat_with_runs(user: Any, llm_server: Any, data: dict[str, Any], language: str) -> None:
    """Messages sent as from a page in ``language`` (the runs' words are in it)."""
    conversation = data["conversation"]
    llm_server.push(
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "2+3"}}]},
        "答案是五。",
    )
    with translation.override(language):
        _, run, _ = await sync_to_async(services.message_post)(
            conversation=conversation, user=user, content="二加三是多少？"
        )
    assert await execute(run.pk) == Run.Status.SUCCEEDED
    llm_server.push({"status": 400, "error_body": {"error": {"message": "boom"}}})
    with translation.override(language):
        _, failed, _ = await sync_to_async(services.message_post)(
            conversation=conversation, user=user, content="再来一次"
        )
    await execute(failed.pk)
    with translation.override(language):
        data["share"] = await sync_to_async(share_create)(conversation=conversation)


def user_pages(data: dict[str, Any]) -> list[str]:
    conversation, base, preset = data["conversation"], data["base"], data["preset"]
    return [
        "/",
        f"/c/{conversation.pk}/",
        f"/c/{conversation.pk}/settings/",
        "/c/list/",
        "/settings/",
        "/presets/",
        f"/presets/{preset.pk}/",
        "/settings/tokens/",
        "/settings/shares/",
        "/knowledge/",
        f"/knowledge/{base.pk}/",
        "/usage/",
        "/no-such-page/",
    ]


def admin_pages(staff: Any) -> list[str]:
    request = RequestFactory().get("/admin/")
    request.user = staff
    pages = ["/admin/"]
    for app in admin.site.get_app_list(request):
        if app["app_label"] not in OUR_APPS:
            continue
        pages.append(app["app_url"])
        for model in app["models"]:
            pages += [url for url in (model.get("admin_url"), model.get("add_url")) if url]
    return [*pages, "/admin/llms/provider/connect/"]  # "Add a connection", linked from them


def page_english(client: Client, url: str, language: str, allowed: set[str]) -> list[str]:
    response = client.get(url, HTTP_ACCEPT_LANGUAGE=language)
    assert response.status_code in {200, 404}, (url, response.status_code)
    assert response.headers.get("Content-Language") == language, url
    return english_left(response.content.decode(), allowed, django_untranslated(language))


@pytest.mark.parametrize("language", LANGUAGES)
async def test_every_page_is_in_the_language_asked_for(
    language, user, chat_model, llm_server, no_launch, django_user_model
) -> None:
    data = await sync_to_async(build_data)(user, llm_server)
    await chat_with_runs(user, llm_server, data, language)
    allowed = await sync_to_async(allowed_words)()

    def visit() -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        client = Client()
        for url in ["/accounts/login/", f"/s/{data['share'].token}/"]:
            found[url] = page_english(client, url, language, allowed)
        client.force_login(user)
        for url in user_pages(data):
            found[url] = page_english(client, url, language, allowed)
        staff = django_user_model.objects.create_superuser("admin", "admin@example.com", "pw")
        client.force_login(staff)
        for url in admin_pages(staff):
            found[url] = page_english(client, url, language, allowed)
        return {url: texts for url, texts in found.items() if texts}

    left = await sync_to_async(visit)()
    first_seen: dict[str, str] = {}
    for url, texts in left.items():
        for text in texts:
            first_seen.setdefault(text, url)
    report = [f"{url}: {text}" for text, url in sorted(first_seen.items(), key=lambda i: i[1])]
    assert not report, "English left on the pages:\n" + "\n".join(report)
