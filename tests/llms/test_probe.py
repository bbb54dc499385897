"""The capability probe against the real scripted server on loopback."""

from __future__ import annotations

import json
import logging

import pytest

from llms.models import LLMModel
from llms.probe import PROMPTS, probe_model
from llms.services import model_apply_verified_abilities, model_probe, model_upsert, provider_upsert
from tests.llms.conftest import SECRET_KEY_VALUE, probe_rules

FULL = {
    "tool_call": True,
    "tool_choice": True,
    "json_mode": True,
    "streaming": True,
    "vision": True,
}


async def probe(server, **overrides):
    server.set_rules(probe_rules(**overrides))
    return await probe_model((server.base_url, None, "scripted-model"), timeout=10)


async def test_full_capabilities(scripted_server):
    report = await probe(scripted_server)
    assert report.verified_abilities == FULL
    assert all(check.ok for check in report.checks.values()), report.to_dict()
    assert report.reachable and report.latency_ms is not None
    assert "get_weather" in report.checks["tool_call_forced"].detail
    assert "10 content chunk(s)" in report.checks["streaming"].detail

    forced, auto = (
        next(r for r in scripted_server.requests if PROMPTS[name] in json.dumps(r["messages"]))
        for name in ("tool_call_forced", "tool_call_auto")
    )
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert auto["tool_choice"] == "auto"
    json_request = next(r for r in scripted_server.requests if "JSON mode" in json.dumps(r))
    assert json_request["response_format"] == {"type": "json_object"}
    assert any(r.get("stream") for r in scripted_server.requests)


async def test_no_tools(scripted_server):
    text = {"content": "It is sunny in Paris, I think."}
    report = await probe(scripted_server, tool_call_forced=text, tool_call_auto=text)
    assert report.verified_abilities == {**FULL, "tool_call": False, "tool_choice": False}
    assert "answered in text" in report.checks["tool_call_auto"].detail
    assert report.checks["json_mode"].ok and report.checks["streaming"].ok


async def test_no_json_mode(scripted_server):
    report = await probe(scripted_server, json_mode={"content": "Sure! Paris is in France."})
    assert report.verified_abilities == {**FULL, "json_mode": False}
    assert "not valid JSON" in report.checks["json_mode"].detail


async def test_forced_tool_choice_rejected_with_http_400(scripted_server):
    rejected = {
        "status": 400,
        "error_body": {"error": {"message": "tool_choice of type function is not supported"}},
    }
    report = await probe(scripted_server, tool_call_forced=rejected)
    assert report.verified_abilities == {**FULL, "tool_choice": False}
    assert report.checks["tool_call_auto"].ok
    assert "rejected a forced tool_choice" in report.checks["tool_call_forced"].detail
    assert "HTTP 400" in report.checks["tool_call_forced"].detail


async def test_no_usage_and_each_check_independent(scripted_server):
    report = await probe(
        scripted_server,
        chat={"content": "pong", "usage": None},
        streaming={"status": 500},
    )
    assert not report.checks["usage"].ok and not report.checks["streaming"].ok
    assert report.checks["chat"].ok and report.checks["json_mode"].ok
    assert report.verified_abilities == {**FULL, "streaming": False}


async def test_unreachable_endpoint_fails_every_check():
    report = await probe_model(("http://127.0.0.1:9/v1", None, "m"), timeout=5)
    assert not report.reachable
    assert not any(check.ok for check in report.checks.values())
    assert "did not answer a plain chat" in report.summary()


@pytest.mark.django_db
def test_failing_provider_never_leaks_the_key(scripted_server, caplog):
    echo = {"status": 401, "error_body": {"error": {"message": f"Bad key {SECRET_KEY_VALUE}"}}}
    scripted_server.set_default(echo)
    provider, _ = provider_upsert(
        name="bad", base_url=scripted_server.base_url, api_key=SECRET_KEY_VALUE
    )
    model, _ = model_upsert(provider=provider, model_id="m")
    with caplog.at_level(logging.DEBUG):
        report = model_probe(model=model, timeout=5)
    assert not report.reachable
    assert "HTTP 401" in report.checks["chat"].detail
    assert SECRET_KEY_VALUE not in caplog.text
    assert SECRET_KEY_VALUE not in json.dumps(report.to_dict())
    stored = LLMModel.objects.get(pk=model.pk)
    assert SECRET_KEY_VALUE not in json.dumps(stored.probe_report)
    with pytest.raises(Exception, match="could not chat"):
        model_apply_verified_abilities(model=stored)
    # the key did reach the server, as a bearer token
    assert scripted_server.requests[0].headers["authorization"] == f"Bearer {SECRET_KEY_VALUE}"


@pytest.mark.django_db
def test_probe_stores_results_and_apply_copies_them(full_server):
    provider, _ = provider_upsert(name="p", base_url=full_server.base_url, api_key="k-123")
    model, _ = model_upsert(provider=provider, model_id="m", abilities={"vision": True})
    full_server.set_rules(probe_rules(tool_call_forced={"status": 400}))
    report = model_probe(model=model, timeout=10)
    model.refresh_from_db()
    assert model.probed_at is not None
    assert model.verified_abilities == {**FULL, "tool_choice": False}
    assert model.probe_report["checks"]["tool_call_forced"]["ok"] is False
    assert model.probe_report["latency_ms"] == report.latency_ms
    assert model.abilities["tool_call"] is False  # declared untouched until applied
    model_apply_verified_abilities(model=model)
    model.refresh_from_db()
    assert model.abilities["tool_call"] and not model.abilities["tool_choice"]
    assert model.abilities["vision"] is True  # not probed, kept


async def test_vision_is_checked_with_a_real_image(scripted_server):
    report = await probe(scripted_server)
    requests = [r for r in scripted_server.requests if PROMPTS["vision"] in json.dumps(r)]
    assert len(requests) == 2  # a red square, then a blue one
    for request in requests:
        parts = request["messages"][-1]["content"]
        assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    assert report.verified_abilities["vision"]
    assert "Red." in report.checks["vision"].detail and "Blue." in report.checks["vision"].detail

    blind = await probe(scripted_server, vision={"content": "I cannot see images."})
    assert blind.verified_abilities == {**FULL, "vision": False}
    assert "did not see the red image" in blind.checks["vision"].detail

    # One colour right by chance is not sight.
    guesser = await probe(scripted_server, vision={"content": "Red"})
    assert not guesser.verified_abilities["vision"]
    assert "did not see the blue image" in guesser.checks["vision"].detail
