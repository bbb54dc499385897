"""Your settings and a chat's own (issue 46) through the real URLconf: instructions,
language, time zone and theme; a conversation's system prompt, sampling parameters within
its model's range and the tools it offers; every refusal a 400 naming the field, nothing
changed; and what a run then sends the model: exactly these parameters, only these tools,
and a system prompt of the model's default, the instructions, the chat's prompt and the
environment, in that order."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from asgiref.sync import sync_to_async

from conversations import services
from conversations.instructions import system_prompt_for
from conversations.models import Conversation, Run
from tests.conversations.running import execute
from tools.services import toolconfig_sync

pytestmark = pytest.mark.django_db


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def api(client, token):
    class Api:
        def get(self, path: str):
            return client.get(path, headers=bearer(token))

        def post(self, path: str, body):
            return client.post(path, body, content_type="application/json", headers=bearer(token))

        def patch(self, path: str, body):
            return client.patch(path, body, content_type="application/json", headers=bearer(token))

    return Api()


def refusal(response, field: str) -> str:
    assert response.status_code == 400, response.content
    body = response.json()
    assert field in body["fields"], body
    return body["error"]


# ------------------------------------------------------------------- /api/me/settings


def test_settings_start_empty_and_change_one_at_a_time(api, other_token, client) -> None:
    assert api.get("/api/me/settings").json() == {
        "instructions": "",
        "language": "",
        "timezone": "",
        "theme": "system",
    }
    changed = api.patch("/api/me/settings", {"instructions": "  Be brief.  ", "language": "ja"})
    assert changed.status_code == 200, changed.content
    assert changed.json()["instructions"] == "Be brief."
    api.patch("/api/me/settings", {"timezone": "Asia/Tokyo", "theme": "dark"})
    assert api.get("/api/me/settings").json() == {
        "instructions": "Be brief.",
        "language": "ja",
        "timezone": "Asia/Tokyo",
        "theme": "dark",
    }
    others = client.get("/api/me/settings", headers=bearer(other_token)).json()
    assert others["instructions"] == "" and others["language"] == ""


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"language": "fr"}, "language", "Unknown language 'fr': use one of en, zh-hans, ja."),
        ({"timezone": "Mars/Olympus"}, "timezone", "Unknown time zone 'Mars/Olympus'"),
        ({"theme": "neon"}, "theme", "Unknown theme 'neon': use one of system, light, dark."),
        ({"instructions": "x" * 10_001}, "instructions", "at most 10,000 characters"),
    ],
)
def test_a_bad_setting_is_refused_naming_it_and_nothing_changes(api, body, field, says) -> None:
    api.patch("/api/me/settings", {"instructions": "Keep me."})
    also = {"timezone": "UTC"} if field == "theme" else {"theme": "dark"}  # valid, with it
    error = refusal(api.patch("/api/me/settings", {**body, **also}), field)
    assert says in error
    assert api.get("/api/me/settings").json() == {
        "instructions": "Keep me.",
        "language": "",
        "timezone": "",
        "theme": "system",
    }


def test_settings_refuse_empty_and_unknown_bodies(api, client) -> None:
    assert api.patch("/api/me/settings", {}).status_code == 400
    assert api.patch("/api/me/settings", {"colour": "red"}).status_code == 400
    assert api.patch("/api/me/settings", {"language": 5}).status_code == 400
    assert client.get("/api/me/settings").status_code == 401


# ----------------------------------------------------------------- a chat's settings


def test_a_chat_takes_its_settings_on_create_and_patch(api, chat_model) -> None:
    toolconfig_sync()
    created = api.post(
        "/api/conversations",
        {
            "system_prompt": "You are a ship's cook.",
            "params": {"temperature": 0.2, "max_tokens": 300},
            "tools": ["calculator"],
        },
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["system_prompt"] == "You are a ship's cook."
    assert body["params"] == {"temperature": 0.2, "max_tokens": 300}
    assert body["tools"] == ["calculator"]
    path = f"/api/conversations/{body['id']}"
    # Merged: top_p added, temperature back to the model's own, max_tokens kept.
    patched = api.patch(path, {"params": {"top_p": 0.9, "temperature": None}, "tools": None})
    assert patched.status_code == 200, patched.content
    assert patched.json()["params"] == {"top_p": 0.9, "max_tokens": 300}
    assert patched.json()["tools"] is None
    assert api.get(path).json()["system_prompt"] == "You are a ship's cook."


@pytest.mark.parametrize(
    ("params", "field", "says"),
    [
        ({"temperature": 2.5}, "params.temperature",
         "temperature must be between 0 and 1.5 for Scripted (got 2.5)."),
        ({"top_p": -0.1}, "params.top_p", "top_p must be between 0 and 1 for Scripted"),
        ({"max_tokens": 0}, "params.max_tokens", "max_tokens must be between 1 and "),
        ({"temperature": "hot"}, "params.temperature", ""),
        ({"seed": 4}, "params.seed", ""),
    ],
)  # fmt: skip
def test_out_of_range_params_are_refused_with_the_range(api, chat_model, params, field, says):
    chat_model.temperature_max = 1.5
    chat_model.save()
    conversation = api.post("/api/conversations", {"params": {"temperature": 1.0}}).json()
    response = api.patch(f"/api/conversations/{conversation['id']}", {"params": params})
    assert says in refusal(response, field)
    assert Conversation.objects.get().params == {"temperature": 1.0}


def test_a_tool_you_may_not_use_is_refused(api, chat_model) -> None:
    toolconfig_sync()
    conversation = api.post("/api/conversations", {}).json()
    error = refusal(
        api.patch(f"/api/conversations/{conversation['id']}", {"tools": ["rm_rf", "calculator"]}),
        "tools",
    )
    assert error.startswith("Not a tool you may use: rm_rf. Choose from: ")
    assert Conversation.objects.get().tools is None
    # Created with a refused setting: no conversation at all.
    assert api.post("/api/conversations", {"tools": ["rm_rf"]}).status_code == 400
    assert Conversation.objects.count() == 1


def test_models_say_what_a_chat_may_set(api, chat_model) -> None:
    [model] = api.get("/api/models").json()["models"]
    assert model["params"] == {
        "temperature": {"min": 0.0, "max": 2.0},
        "top_p": {"min": 0.0, "max": 1.0},
        "max_tokens": {"min": 1.0, "max": float(chat_model.max_output_tokens or 131072)},
    }


# --------------------------------------------------------------- what the model gets


@pytest.mark.django_db(transaction=True)
async def test_a_run_sends_exactly_the_chats_params_tools_and_prompt(
    user, chat_model, llm_server, no_launch
) -> None:
    await sync_to_async(toolconfig_sync)()
    chat_model.system_prompt = "ADMIN: cite sources."
    await chat_model.asave()
    user.first_name, user.last_name = "Alice", "Martin"
    await user.asave()
    from conversations import chat_settings, user_settings

    await sync_to_async(user_settings.settings_update)(
        user, instructions="USER: answer in haiku.", timezone="Asia/Tokyo", language="ja"
    )
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    await sync_to_async(chat_settings.conversation_set_system_prompt)(
        conversation=conversation, system_prompt="CHAT: you are a ship's cook."
    )
    await sync_to_async(chat_settings.conversation_set_params)(
        conversation=conversation,
        user=user,
        params={"temperature": 0.3, "top_p": 0.5, "max_tokens": 256},
    )
    await sync_to_async(chat_settings.conversation_set_tools)(
        conversation=conversation, user=user, tools=["calculator"]
    )
    llm_server.push(
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
        "Forty-two.",
    )
    _, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="What is 6 times 7?"
    )
    before = datetime.now(UTC)
    assert await execute(run.pk) == Run.Status.SUCCEEDED
    after = datetime.now(UTC)

    first, second = llm_server.requests[:2]
    for request in (first, second):
        assert (request["temperature"], request["top_p"], request["max_tokens"]) == (0.3, 0.5, 256)
        assert [tool["function"]["name"] for tool in request["tools"]] == ["calculator"]
        system = request["messages"][0]["content"]
        order = [system.index(mark) for mark in ("ADMIN:", "USER:", "CHAT:", "## Environment")]
        assert order == sorted(order)
        assert "- User: Alice Martin (alice)" in system
        assert "answer in Japanese" in system
        assert "- Tools on offer: calculator" in system
        # The time of the call, in the user's zone (the minute it was sent in).
        shown = re.search(
            r"Current date and time: .*?, (\d\d:\d\d) \(Asia/Tokyo, UTC\+09:00\)", system
        )
        assert shown, system
        tokyo = ZoneInfo("Asia/Tokyo")
        minutes = {
            f"{(before + timedelta(seconds=s)).astimezone(tokyo):%H:%M}"
            for s in range(0, int((after - before).total_seconds()) + 2)
        }
        assert shown.group(1) in minutes


def test_the_environment_moves_with_the_clock_between_calls(user, chat_model) -> None:
    """The prompt a run gets is asked again before each call: its clock moves."""
    conversation = services.conversation_create(owner=user)
    times = iter([datetime(2026, 12, 6, 9, 0, tzinfo=UTC), datetime(2026, 12, 6, 9, 7, tzinfo=UTC)])
    prompt = system_prompt_for(
        conversation=conversation, model=chat_model, tool_names=[], clock=lambda: next(times)
    )
    first, second = prompt(), prompt()
    assert "Sunday 06 December 2026, 09:00 (UTC, UTC+00:00)" in first
    assert "Sunday 06 December 2026, 09:07 (UTC, UTC+00:00)" in second
    assert "- No tools on offer." in first
    assert "Answer in the language the user writes in." in first
