"""A run reads its model and tools when it starts: admin changes reach the next run."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group

from conversations import services
from conversations.models import Run
from tests.conversations.running import execute
from tools.models import ToolConfig
from tools.services import toolconfig_sync

pytestmark = pytest.mark.django_db(transaction=True)


def offered_tools(request) -> set[str]:
    """Tool names a chat request offered the model (native calling or the JSON catalog)."""
    names = {t["function"]["name"] for t in request.get("tools") or ()}
    system = " ".join(m.get("content") or "" for m in request["messages"] if m["role"] == "system")
    return names | {name for name in ("calculator", "current_time") if name in system}


async def run_once(user, conversation, llm_server, text="hi") -> Run:
    llm_server.push("Final answer.")
    _, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content=text
    )
    await execute(run.pk)
    return await Run.objects.aget(pk=run.pk)


async def test_disabling_a_tool_reaches_the_next_run(user, chat_model, llm_server, no_launch):
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    await run_once(user, conversation, llm_server)
    assert "calculator" in offered_tools(llm_server.requests[0])

    await sync_to_async(toolconfig_sync)()
    row = await ToolConfig.objects.aget(name="calculator")
    row.enabled = False
    await row.asave()
    llm_server.requests.clear()
    await run_once(user, conversation, llm_server, "again")

    assert "calculator" not in offered_tools(llm_server.requests[0])
    assert "current_time" in offered_tools(llm_server.requests[0])


async def test_leaving_the_models_group_refuses_the_next_run(
    user, chat_model, llm_server, no_launch
):
    team = await Group.objects.acreate(name="team")
    await sync_to_async(user.groups.add)(team)
    await sync_to_async(chat_model.allowed_groups.add)(team)
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    assert (await run_once(user, conversation, llm_server)).status == "succeeded"

    await sync_to_async(user.groups.remove)(team)
    run = await run_once(user, conversation, llm_server, "again")

    assert run.status == "failed" and "not available to you" in run.error


def test_a_new_quota_reaches_the_next_message(user, chat_model, no_launch):
    from llms.models import UsageQuota
    from llms.services import usage_record

    conversation = services.conversation_create(owner=user)
    services.message_post(conversation=conversation, user=user, content="one")  # no quota yet
    Run.objects.update(status="succeeded")
    usage_record(user=user, model=chat_model, usage={"total_tokens": 50})
    UsageQuota.objects.create(user=user, daily_token_limit=10)

    _, run, _ = services.message_post(conversation=conversation, user=user, content="two")

    assert run.status == "failed" and "tokens for today" in run.error


def test_a_new_default_model_reaches_the_next_conversation(user, chat_model):
    from llms.models import LLMModel
    from llms.services import model_set_default

    other = LLMModel.objects.create(
        provider=chat_model.provider, model_id="other", display_name="Other"
    )
    assert services.conversation_create(owner=user).model_id == chat_model.pk
    model_set_default(model=other)  # queryset updates only

    assert services.conversation_create(owner=user).model_id == other.pk
