"""Run starts read models and tools from a per-process cache that admin changes invalidate."""

from __future__ import annotations

import logging
import threading

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.test import override_settings

from agentsite import configcache
from conversations import services
from conversations.models import Run
from conversations.runner import execute_run
from tools.models import MCPServer, ToolConfig
from tools.services import toolconfig_sync

pytestmark = pytest.mark.django_db(transaction=True)


def offered_tools(request) -> set[str]:
    """Tool names a chat request offered the model (native calling or the JSON catalog)."""
    names = {t["function"]["name"] for t in request.get("tools") or ()}
    system = " ".join(m.get("content") or "" for m in request["messages"] if m["role"] == "system")
    return names | {name for name in ("calculator", "current_time") if name in system}


async def run_once(user, conversation, llm_server, text="hi") -> Run:
    llm_server.push("Done.", "Final answer.")
    _, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content=text
    )
    await execute_run(run.pk)
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


def test_config_changes_replace_the_token(db, chat_model):
    before = configcache.current_token()
    chat_model.display_name = "Renamed"
    chat_model.save()
    after_save = configcache.current_token()
    server = MCPServer.objects.create(name="docs", transport="http", url="http://127.0.0.1:9/")
    after_mcp = configcache.current_token()
    from tools.mcp.services import _record_health

    _record_health(server.pk, error="", tools=[])  # a refreshed tool list (a queryset update)

    assert len({before, after_save, after_mcp, configcache.current_token()}) == 4


def test_cache_rebuilds_on_a_new_token_after_max_age_and_drops_the_oldest():
    cache = configcache.VersionedCache(max_age=60.0, max_entries=2)
    builds = []

    def build(value):
        return lambda: builds.append(value) or value

    assert cache.get("a", "t1", build("a1")) == "a1"
    assert cache.get("a", "t1", build("never")) == "a1"
    assert cache.get("a", "t2", build("a2")) == "a2"
    cache.get("b", "t2", build("b"))
    cache.get("c", "t2", build("c"))  # over the bound: "a" was least recently used
    assert cache.get("a", "t2", build("a3")) == "a3"
    stale = configcache.VersionedCache(max_age=0.0)
    stale.get("k", "t", build("k1"))
    assert stale.get("k", "t", build("k2")) == "k2"
    assert builds == ["a1", "a2", "b", "c", "a3", "k1", "k2"]


class StatementLog(logging.Handler):
    """SQL statements run by request and run code (not the background run poller)."""

    def __init__(self) -> None:
        super().__init__()
        self.statements: list[str] = []
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        sql = str(getattr(record, "sql", ""))
        keyword = sql.lstrip().split(" ", 1)[0].upper()
        if record.threadName != "agentsite-run-poller" and keyword in {
            "SELECT", "INSERT", "UPDATE", "DELETE",
        }:  # fmt: skip
            with self._lock:
                self.statements.append(sql)


@override_settings(DEBUG=True)  # Django logs each query only then
async def test_a_message_and_its_run_stay_within_their_query_budget(
    user, chat_model, llm_server, no_launch
):
    await sync_to_async(toolconfig_sync)()  # as on any site that ran before
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    await run_once(user, conversation, llm_server)  # warms the configuration cache
    statements = StatementLog()
    logger = logging.getLogger("django.db.backends")
    logger.addHandler(statements)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        llm_server.push("Done.", "Final answer.")
        _, run, _ = await sync_to_async(services.message_post)(
            conversation=conversation, user=user, content="second"
        )
        posted = len(statements.statements)
        assert await execute_run(run.pk) == "succeeded"
    finally:
        logger.removeHandler(statements)
        logger.setLevel(level)
    ran = statements.statements[posted:]

    assert posted <= 7, statements.statements[:posted]
    assert len(ran) <= 12, ran


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
