"""Fixtures for the llms tests: a real scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from core.crypto import reset_cache
from llms.models import LLMModel
from llms.probe import PROMPTS, SQUARES_PNG
from llms.services import model_upsert, provider_upsert
from testing.scripted_server import ScriptedServer

SECRET_KEY_VALUE = "sk-test-secret-0123456789abcdefWXYZ"

TOOL_CALL = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}


def probe_rules(**overrides: Any) -> list[dict[str, Any]]:
    """``contains`` rules answering each probe check like a fully capable model.

    ``overrides`` replace the response of one check (keys as in ``llms.probe.PROMPTS``).
    """
    responses: dict[str, Any] = {
        "chat": {"content": "pong"},
        "streaming": {"content": "1 2 3 4 5 6 7 8 9 10"},
        "tool_call_forced": TOOL_CALL,
        "tool_call_auto": TOOL_CALL,
        "json_mode": {"content": '{"city": "Paris", "country": "France"}'},
    }
    responses.update(overrides)
    rules = [{"contains": PROMPTS[name], "response": responses[name]} for name in responses]
    if "vision" not in overrides:  # a model that sees: the colour of each square
        rules += [
            {"contains": SQUARES_PNG[colour][-24:], "response": {"content": f"{colour.title()}."}}
            for colour in SQUARES_PNG
        ]
    return rules


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    """The shared user fixtures hash passwords; PBKDF2 costs ~0.5 s a user on this box."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fresh_encryption_keys() -> Iterator[None]:
    """Tests change ENCRYPTION_KEYS; never let a cached key set leak between tests."""
    reset_cache()
    yield
    reset_cache()


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def full_server(scripted_server: ScriptedServer) -> ScriptedServer:
    scripted_server.set_rules(probe_rules())
    return scripted_server


@pytest.fixture
def admin_client(client, staff_user):
    """The admin as the llms pages are used: a staff user, not pytest-django's superuser."""
    client.force_login(staff_user)
    return client


@pytest.fixture
def old_default() -> LLMModel:
    """A default model of another provider, which a new default replaces."""
    provider, _ = provider_upsert(name="cloud", base_url="https://llm.test/v1")
    model, _ = model_upsert(provider=provider, model_id="big", is_default=True)
    return model
