"""add_provider, add_model, seed_models and probe_models, with their exact flags."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from llms.models import LLMModel, Provider
from tests.llms.conftest import SECRET_KEY_VALUE

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_add_provider_is_idempotent_and_keeps_the_key():
    out = run(
        "add_provider",
        "--name",
        "openai",
        "--base-url",
        "https://api.openai.com/v1",
        "--api-key",
        SECRET_KEY_VALUE,
        "--kind",
        "openai",
        "--timeout",
        "30",
    )
    assert "Created provider 'openai'" in out and "ending in …WXYZ" in out
    assert SECRET_KEY_VALUE not in out
    out = run("add_provider", "--name", "openai", "--base-url", "http://localhost:8080/v1")
    assert "Updated provider" in out
    provider = Provider.objects.get()
    assert provider.base_url == "http://localhost:8080/v1"
    assert provider.api_key == SECRET_KEY_VALUE and provider.timeout == 30.0
    run("add_provider", "--name", "openai", "--api-key", "")
    assert Provider.objects.get().api_key == ""


def test_add_provider_needs_a_base_url_to_create():
    with pytest.raises(CommandError, match="base URL"):
        run("add_provider", "--name", "x")
    with pytest.raises(CommandError, match="URL"):
        run("add_provider", "--name", "x", "--base-url", "ftp://nope")
    with pytest.raises(CommandError, match="credentials"):
        run("add_provider", "--name", "x", "--base-url", "https://me:pw@llm.test/v1")


def test_add_provider_headers_and_key_from_env(monkeypatch):
    monkeypatch.setenv("MY_KEY", SECRET_KEY_VALUE)
    run(
        "add_provider",
        "--name",
        "p",
        "--base-url",
        "http://llama:8080/v1",
        "--api-key-env",
        "MY_KEY",
        "--header",
        "X-Title=agentsite",
    )
    provider = Provider.objects.get()
    assert provider.api_key == SECRET_KEY_VALUE
    assert provider.extra_headers == {"X-Title": "agentsite"}


def test_add_model_is_idempotent_with_exact_flags():
    run("add_provider", "--name", "openai", "--base-url", "https://api.openai.com/v1")
    out = run(
        "add_model",
        "--provider",
        "openai",
        "--model",
        "gpt-4o-mini",
        "--abilities",
        "tool_call,json_mode,streaming",
        "--context-window",
        "128000",
        "--max-output-tokens",
        "16384",
        "--display-name",
        "GPT-4o mini",
        "--roles",
        "general,fast",
        "--default",
    )
    assert "Created model 'gpt-4o-mini'" in out and "default" in out
    model = LLMModel.objects.get()
    assert model.abilities == {
        "tool_call": True,
        "tool_choice": True,
        "json_mode": True,
        "json_schema": False,
        "streaming": True,
        "vision": False,
    }
    assert (model.context_window, model.max_output_tokens) == (128_000, 16_384)
    assert model.display_name == "GPT-4o mini" and model.roles == ["general", "fast"]
    assert model.is_default

    out = run(
        "add_model",
        "--provider",
        "openai",
        "--model",
        "gpt-4o-mini",
        "--abilities",
        "tool_call,no-tool_choice,streaming",
    )
    assert "Updated model" in out
    model = LLMModel.objects.get()
    assert model.abilities["tool_call"] and not model.abilities["tool_choice"]
    assert not model.abilities["json_mode"]
    assert model.context_window == 128_000 and model.display_name == "GPT-4o mini"

    run("add_model", "--provider", "openai", "--model", "other", "--default")
    assert list(LLMModel.objects.filter(is_default=True).values_list("model_id", flat=True)) == [
        "other"
    ]


def test_add_model_refuses_unknown_provider_ability_or_role():
    with pytest.raises(CommandError, match="no provider"):
        run("add_model", "--provider", "nope", "--model", "m")
    run("add_provider", "--name", "p", "--base-url", "http://x.test/v1")
    with pytest.raises(CommandError, match="unknown abilities"):
        run("add_model", "--provider", "p", "--model", "m", "--abilities", "telepathy")
    with pytest.raises(CommandError, match="unknown roles"):
        run("add_model", "--provider", "p", "--model", "m", "--roles", "wizard")


def test_seed_models_without_env_does_nothing_and_says_why(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENTSITE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    out = run("seed_models", "--no-local")
    assert "skipped" in out and "OPENAI_API_KEY" in out
    assert not LLMModel.objects.exists()


def test_seed_models_with_env_creates_a_default_once(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY_VALUE)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("AGENTSITE_MODEL", "gpt-4.1-mini")
    out = run("seed_models")
    assert "created provider 'openai'" in out and SECRET_KEY_VALUE not in out
    model = LLMModel.objects.select_related("provider").get()
    assert model.model_id == "gpt-4.1-mini" and model.is_default
    assert model.provider.base_url == "https://api.openai.com/v1"
    assert model.provider.api_key == SECRET_KEY_VALUE
    assert "already configured" in run("seed_models")
    assert LLMModel.objects.count() == 1


def test_seed_models_defaults_the_model_name(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    monkeypatch.delenv("AGENTSITE_MODEL", raising=False)
    run("seed_models")
    model = LLMModel.objects.select_related("provider").get()
    assert model.model_id == "gpt-4o-mini" and model.provider.api_key == ""


def test_probe_models_command_probes_and_applies(full_server):
    run("add_provider", "--name", "p", "--base-url", full_server.base_url)
    run("add_model", "--provider", "p", "--model", "scripted-model")
    out = run("probe_models", "--model", "scripted-model", "--apply")
    assert "7/7 checks passed" in out and "applied" in out
    model = LLMModel.objects.get()
    assert model.abilities["tool_call"] and model.abilities["json_mode"]
    assert model.probed_at is not None


def test_probe_models_fails_for_unreachable_models():
    run("add_provider", "--name", "p", "--base-url", "http://127.0.0.1:9/v1")
    run("add_model", "--provider", "p", "--model", "m")
    with pytest.raises(CommandError, match="did not answer"):
        run("probe_models", "--all", "--timeout", "5")
