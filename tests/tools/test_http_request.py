from __future__ import annotations

import json

import pytest

from tools.builtin.http_request import build, fill_url_template
from tools.registry import ToolContext


def _config(server, **extra):
    return {
        "endpoints": [
            {
                "name": "get_order",
                "description": "Look up an order by id",
                "method": "GET",
                "url_template": server.url("/orders/{order_id}?lang=en"),
                "headers": {"Accept": "application/json"},
                "parameters": {
                    "type": "object",
                    "properties": {"order_id": {"type": "string"}, "verbose": {"type": "boolean"}},
                    "required": ["order_id"],
                },
            },
            {
                "name": "create ticket!",
                "method": "POST",
                "url_template": server.url("/tickets"),
                "parameters": {
                    "type": "object",
                    "properties": {"title": {"type": "string"}},
                    "required": ["title"],
                },
            },
            {"name": "broken", "url_template": "http://x/", "parameters": {"type": 12}},
        ],
        "secret_headers": json.dumps(
            {"get_order": {"Authorization": "Bearer s3cret"}, "*": {"X-Api": "all"}}
        ),
        "allow_hosts": ["127.0.0.1"],
        **extra,
    }


def test_url_template_quotes_values():
    url, rest = fill_url_template(
        "https://api.test/u/{user}/items?q={q}", {"user": "../admin@evil/x", "q": "a b&c", "n": 1}
    )
    assert url == "https://api.test/u/..%2Fadmin%40evil%2Fx/items?q=a%20b%26c"
    assert rest == {"n": 1}


async def test_one_tool_per_endpoint_with_headers_and_arguments(web_server):
    web_server.route("/orders/A%2F1", body='{"status": "shipped"}', Content_Type="application/json")
    web_server.route("/tickets", status=201, body='{"id": 7}', Content_Type="application/json")
    tools = {t.name: t for t in build(_config(web_server), ToolContext())}
    assert set(tools) == {"get_order", "create_ticket"}  # "broken" skipped, name sanitised
    assert tools["get_order"].description == "Look up an order by id"

    order = await tools["get_order"].invoke({"order_id": "A/1", "verbose": True})
    assert order.content.startswith("HTTP 200") and '"status": "shipped"' in order.content
    sent = web_server.requests[0]
    assert sent.path == "/orders/A%2F1?lang=en&verbose=true"
    assert sent.headers["Authorization"] == "Bearer s3cret" and sent.headers["X-Api"] == "all"

    ticket = await tools["create_ticket"].invoke({"title": "Broken printer"})
    assert ticket.content.startswith("HTTP 201")
    posted = web_server.requests[1]
    assert posted.method == "POST" and posted.json() == {"title": "Broken printer"}
    assert "Authorization" not in posted.headers and posted.headers["X-Api"] == "all"


async def test_failures_are_error_observations(web_server):
    web_server.route("/orders/x", status=500, body="boom", Content_Type="text/plain")
    tools = {t.name: t for t in build(_config(web_server), ToolContext())}
    failed = await tools["get_order"].invoke({"order_id": "x"})
    assert failed.is_error and "HTTP 500" in failed.content and "boom" in failed.content
    with pytest.raises(ValueError, match="required property"):
        await tools["get_order"].invoke({})


async def test_ssrf_guard_applies_without_allow_hosts(web_server):
    config = _config(web_server)
    config["allow_hosts"] = []
    tools = {t.name: t for t in build(config, ToolContext())}
    refused = await tools["get_order"].invoke({"order_id": "1"})
    assert refused.is_error and "URL refused" in refused.content
    assert web_server.requests == []
