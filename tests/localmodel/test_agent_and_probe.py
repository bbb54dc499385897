"""The capability probe, the ``local`` provider kind and a complete agent run, for real."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from django.core.management import call_command

from engine import (
    ChatMessage,
    ChatResponse,
    OpenAICompatibleLLM,
    ReActAgent,
    ToolRegistry,
    tool,
)
from engine.events import AnswerDelta, Done, IterationDone, IterationStart
from llms.local_model import (
    JSON_SCHEMA_CHECK,
    LOCAL_MODEL_ID,
    abilities_from_report,
    check_json_schema,
    local_model_probe,
)
from llms.local_server import ServerInfo, get_server, reset_server
from llms.models import LLMModel
from llms.providers.local import PLACEHOLDER_BASE_URL, LocalServerLLM
from llms.services import build_llm, model_upsert, provider_upsert
from tests.localmodel.conftest import N_CTX, make_llm


@pytest.fixture
def site_uses_session_server(settings, local_state_dir: Path, local_server: ServerInfo):
    """Point the site's supervisor at the session's server (it adopts, never owns it)."""
    settings.LOCAL_MODEL_DIR = local_state_dir
    settings.LOCAL_MODEL_N_CTX = N_CTX
    reset_server()
    yield local_server
    reset_server()


async def test_probe_verdicts(local_server: ServerInfo):
    llm = make_llm(local_server, abilities={}, max_tokens=64)
    try:
        report = await local_model_probe(llm, label="SmolLM2", timeout=120)
    finally:
        await llm.aclose()
    checks = report.checks
    assert report.reachable, report.to_dict()
    for name in ("chat", "streaming", "usage", "json_mode", "tool_call_forced", JSON_SCHEMA_CHECK):
        assert checks[name].ok, (name, checks[name].detail)
    # tool_choice="auto" through llama.cpp yields no call from this model: the agent must
    # not use native mode with this model, JSON mode with a schema instead.
    assert not checks["tool_call_auto"].ok
    # SmolLM2 is a text model: shown an image, it does not name its colour.
    assert not checks["vision"].ok, checks["vision"].detail
    abilities = abilities_from_report(report)
    assert abilities == {
        "tool_call": False,
        "tool_choice": True,
        "json_mode": True,
        "json_schema": True,
        "streaming": True,
        "vision": False,
    }


async def test_json_schema_check_fails_on_the_openai_dialect(local_server: ServerInfo):
    """llama.cpp rejects OpenAI's ``{"type": "json_schema"}`` (HTTP 500 carrying a
    validation error): that is why the dialect is recorded with the model."""
    llm = make_llm(local_server, max_tokens=24)
    try:
        check = await check_json_schema(llm, dialect="openai", max_tokens=24)
    finally:
        await llm.aclose()
    assert not check.ok
    assert "HTTP 500" in check.detail and "json_object" in check.detail


@pytest.mark.django_db
def test_seed_models_seeds_the_local_model(site_uses_session_server, monkeypatch, capsys):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENTSITE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    call_command("seed_models", "--needs-local")
    assert capsys.readouterr().out.strip() == "yes"

    call_command("seed_models")
    out = capsys.readouterr().out
    assert "created provider 'local'" in out
    model = LLMModel.objects.select_related("provider").get()
    assert (model.provider.name, model.provider.kind) == ("local", "local")
    assert model.model_id == LOCAL_MODEL_ID and model.is_default
    assert model.context_window == N_CTX
    assert model.abilities["json_schema"] is True
    assert model.abilities["json_schema_dialect"] == "llamacpp"
    assert model.abilities["json_mode"] is True and model.abilities["tool_call"] is False
    assert model.probe_report["reachable"] and model.probed_at is not None
    assert model.probe_report["checks"][JSON_SCHEMA_CHECK]["ok"]
    # The seeding process adopted the running server instead of starting a second one.
    assert get_server().ensure().pid == site_uses_session_server.pid
    assert not get_server().owned

    call_command("seed_models", "--needs-local")
    assert capsys.readouterr().out.strip() == "yes"  # a local model exists: keep it installed
    call_command("seed_models")
    assert "already configured" in capsys.readouterr().out


@pytest.mark.django_db
def test_local_provider_builds_a_client_of_the_supervised_server(site_uses_session_server):
    provider, _ = provider_upsert(name="local", kind="local", base_url=PLACEHOLDER_BASE_URL)
    row, _ = model_upsert(provider=provider, model_id=LOCAL_MODEL_ID, max_output_tokens=16)
    llm = build_llm(model=row)
    assert isinstance(llm, LocalServerLLM) and isinstance(llm, OpenAICompatibleLLM)

    async def chat() -> ChatResponse:
        try:
            return await llm.chat([ChatMessage("user", "Say hi.")])
        finally:
            await llm.aclose()

    reply = asyncio.run(chat())
    assert reply.content.strip() and reply.usage.completion_tokens <= 16
    # Pointed at the running server, with its key, whatever the row says.
    assert llm.base_url == site_uses_session_server.base_url


@tool()
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"Sunny, 21 C in {city}."


async def test_agent_run_in_json_schema_mode(local_server: ServerInfo):
    """Tool call, observation, a final answer streamed from its JSON action as the model
    writes it (no second call): the whole loop, for real."""
    llm = make_llm(
        local_server,
        abilities={"json_mode": True, "json_schema": True, "json_schema_dialect": "llamacpp"},
        max_tokens=160,
    )
    events = []
    agent = ReActAgent(llm, ToolRegistry([get_weather]), max_iterations=4, on_event=events.append)
    assert not agent._native_mode_active
    try:
        result = await agent.run("What is the weather in Paris?")
        chunks = [chunk async for chunk in agent.stream_answer(result, "What is the weather?")]
    finally:
        await llm.aclose()

    assert result.status == "succeeded" and result.stop_reason == "answer", result.answer
    step = result.steps[0]
    assert step.tool_name == "get_weather" and step.error is None
    assert step.tool_args.get("city") and step.observation.startswith("Sunny, 21 C")
    assert any(m.content.startswith("Observation: Sunny") for m in result.messages)
    assert result.answer.strip()
    kinds = [type(e) for e in events]
    assert kinds.index(IterationStart) < kinds.index(IterationDone)
    assert result.answer_streamed and chunks == [result.answer]
    streamed = "".join(e.content for e in events if isinstance(e, AnswerDelta))
    assert sum(1 for e in events if isinstance(e, AnswerDelta)) >= 2 and streamed == result.answer
    assert "{" not in streamed and '"answer"' not in streamed  # the field's text, not JSON
    assert isinstance(events[-1], Done)


SMALL_MODEL_QUESTIONS = [
    "What is 17 * 23?",
    "What time is it in Tokyo right now?",
    "What is the capital of France?",
    "What time is it in the city of Qwertyuiopville?",
]


@pytest.mark.parametrize("question", SMALL_MODEL_QUESTIONS)
async def test_a_small_models_answer_is_a_tool_result_or_its_own_never_a_retelling(
    local_server: ServerInfo, question: str
):
    """Whatever the 135M model picks, the answer is the tool's own words (or says the tool
    failed), or a direct answer: never a retold result, scaffolding or an entity."""
    from tools.builtin import calculator, current_time
    from tools.registry import ToolContext

    llm = make_llm(
        local_server,
        abilities={"json_mode": True, "json_schema": True, "json_schema_dialect": "llamacpp"},
        max_tokens=160,
    )
    tools = [*calculator.build({}, ToolContext()), *current_time.build({}, ToolContext())]
    agent = ReActAgent(llm, ToolRegistry(tools), max_iterations=4, small_model=True)
    try:
        result = await agent.run(question)
    finally:
        await llm.aclose()

    assert result.status == "succeeded" and len(result.steps) <= 1, result.answer
    if result.steps:
        step = result.steps[0]
        expected = (
            step.observation
            if step.error is None
            else f"The {step.tool_name} tool could not answer this: {step.error}"
        )
        assert result.answer == expected
    for debris in ("&#", "&amp;", "&lt;", "## Question", "### Step", '"answer"'):
        assert debris not in result.answer
    assert result.answer.strip() and result.answer[0] not in "}],"
