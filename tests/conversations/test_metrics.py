"""GET /metrics after real runs (issue 44): the values a run should move, moved."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from prometheus_client.parser import text_string_to_metric_families

from conversations import services
from engine import Tool
from tests.conversations.running import execute
from tools.registry import register, spec_for_tool

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "metrics-token-for-tests"


def _echo(text: str) -> str:
    if text == "fail":
        raise ValueError("echo refuses 'fail'")
    return text


register(
    spec_for_tool(
        Tool(
            name="metered_echo",
            description="Echoes text (test tool).",
            parameters={
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
            func=_echo,
        )
    )
)


def scrape(client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_are_off_without_a_token_and_refuse_a_wrong_one(client, settings):
    settings.AGENTSITE_METRICS_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 404
    settings.AGENTSITE_METRICS_TOKEN = TOKEN
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401


async def test_a_run_moves_the_run_llm_and_tool_metrics(
    user, chat_model, llm_server, no_launch, client, settings
):
    settings.AGENTSITE_METRICS_TOKEN = TOKEN
    llm_server.push(
        {"tool_calls": [{"name": "metered_echo", "arguments": {"text": "hi"}}]},
        {"tool_calls": [{"name": "metered_echo", "arguments": {"text": "fail"}}]},
        {"content": "Echoed.", "usage": {"prompt_tokens": 11, "completion_tokens": 3}},
    )
    model = chat_model.display_name or chat_model.model_id
    before = await sync_to_async(scrape)(client)
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _message, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="Echo hi"
    )
    queued = await sync_to_async(scrape)(client)
    assert value(queued, "agentsite_queue_depth") == value(before, "agentsite_queue_depth") + 1

    assert await execute(run.pk) == "succeeded"
    after = await sync_to_async(scrape)(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("agentsite_runs_started_total") == 1
    assert moved("agentsite_runs_total", status="succeeded") == 1
    assert moved("agentsite_run_duration_seconds_count", status="succeeded") == 1
    assert moved("agentsite_llm_first_token_seconds_count", model=model) == 1
    assert moved("agentsite_llm_tokens_total", model=model, kind="completion") >= 3
    assert moved("agentsite_llm_tokens_total", model=model, kind="prompt") >= 11
    assert moved("agentsite_tool_calls_total", tool="metered_echo") == 2
    assert moved("agentsite_tool_errors_total", tool="metered_echo") == 1
    assert value(after, "agentsite_queue_depth") == value(before, "agentsite_queue_depth")
    assert ("agentsite_approvals_waiting", ()) in after
