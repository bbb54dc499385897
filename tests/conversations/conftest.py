"""Fixtures for chat tests: a real scripted OpenAI-compatible server and a model row."""

from __future__ import annotations

import pytest

from engine.llm.scripted_server import ScriptedServer


@pytest.fixture
def llm_server():
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def chat_model(db, llm_server):
    from llms.models import LLMModel, Provider

    provider = Provider.objects.create(name="scripted", base_url=llm_server.base_url, api_key="k")
    return LLMModel.objects.create(
        provider=provider,
        model_id="scripted-model",
        display_name="Scripted",
        abilities={"tool_call": True, "json_mode": True, "streaming": True},
        context_window=32_000,
        max_output_tokens=2_000,
        is_default=True,
    )
