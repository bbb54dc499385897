"""Admin-defined HTTP endpoints, against real loopback servers (no mocked transport)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from tests.tools.conftest import LoopbackServer, _handler
from tools.builtin.http_request import (
    SPEC,
    TemplateError,
    build,
    call_needs_confirmation,
    fill_url_template,
)
from tools.models.config import config_schema_errors
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
        "allow_origins": [server.url("")],
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
    config["allow_origins"] = []
    tools = {t.name: t for t in build(config, ToolContext())}
    refused = await tools["get_order"].invoke({"order_id": "1"})
    assert refused.is_error and "URL refused" in refused.content
    assert web_server.requests == []


# --- URL templates: one value, one path segment ------------------------------------------


@pytest.mark.parametrize("value", ["..", ".", ""])
def test_a_value_cannot_be_a_dot_or_empty_path_segment(value):
    with pytest.raises(TemplateError, match="'user'"):
        fill_url_template("https://api.test/u/{user}/items", {"user": value})
    with pytest.raises(TemplateError):
        fill_url_template("https://api.test/u/{a}{b}/items", {"a": value[:1], "b": value[1:]})


def test_dots_inside_a_segment_or_in_the_query_stay_values():
    url, _ = fill_url_template("https://api.test/f/{name}.json?q={q}", {"name": "..", "q": ".."})
    assert url == "https://api.test/f/...json?q=.."
    url, _ = fill_url_template("https://api.test/f/{name}", {"name": "../../admin"})
    assert url == "https://api.test/f/..%2F..%2Fadmin"


async def test_a_dot_dot_value_never_reaches_the_server(web_server):
    web_server.route("/admin", body="admin page", Content_Type="text/plain")
    tools = {t.name: t for t in build(_config(web_server), ToolContext())}
    refused = await tools["get_order"].invoke({"order_id": ".."})
    assert refused.is_error and "path segment" in refused.content
    assert web_server.requests == []


# --- redirects to another origin ---------------------------------------------------------


@pytest.fixture
def other_server() -> Iterator[LoopbackServer]:
    """A second loopback server: the same host, another port, so another origin."""
    state = LoopbackServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.port = httpd.server_address[1]
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


def _redirecting(server, other, **endpoint):
    """One GET endpoint on ``server`` with a configured and a secret header."""
    return {
        "endpoints": [
            {
                "name": "fetch",
                "url_template": server.url("/go"),
                "headers": {"X-Configured": "configured-value"},
                **endpoint,
            }
        ],
        "secret_headers": json.dumps({"fetch": {"Authorization": "Bearer s3cret"}}),
        "allow_origins": [server.url(""), other.url("")],
    }


SECRET_HEADERS = ("Authorization", "X-Configured")


async def test_cross_origin_redirects_are_not_followed_by_default(web_server, other_server):
    web_server.route("/go", status=302, Location=other_server.url("/landing"))
    other_server.route("/landing", body="landed", Content_Type="text/plain")
    (tool,) = build(_redirecting(web_server, other_server), ToolContext())
    result = await tool.invoke({})
    assert result.is_error and "another origin" in result.content
    assert f"127.0.0.1:{other_server.port}" in result.content
    assert other_server.requests == []


async def test_a_followed_cross_origin_redirect_drops_the_headers(web_server, other_server):
    web_server.route("/go", status=307, Location=other_server.url("/hop"))
    other_server.route("/hop", status=302, Location=web_server.url("/back"))
    web_server.route("/back", body="back home", Content_Type="text/plain")
    config = _redirecting(web_server, other_server, cross_origin_redirects="follow_without_headers")
    (tool,) = build(config, ToolContext())
    result = await tool.invoke({})
    assert not result.is_error and "back home" in result.content
    first, back = web_server.requests
    assert all(first.headers.get(h) for h in SECRET_HEADERS)
    (hop,) = other_server.requests
    assert hop.headers.get("User-Agent") and not any(h in hop.headers for h in SECRET_HEADERS)
    # Back on the first origin, but at a path the other origin chose: still without them.
    assert back.path == "/back" and not any(h in back.headers for h in SECRET_HEADERS)


async def test_same_origin_redirects_keep_the_headers(web_server, other_server):
    web_server.route("/go", status=301, Location="/moved")
    web_server.route("/moved", body="moved here", Content_Type="text/plain")
    (tool,) = build(_redirecting(web_server, other_server), ToolContext())
    result = await tool.invoke({})
    assert not result.is_error and "moved here" in result.content
    assert all(web_server.requests[1].headers.get(h) for h in SECRET_HEADERS)


# --- allow-listing by origin -------------------------------------------------------------


async def test_allow_origins_open_one_port_not_the_host(web_server, other_server):
    other_server.route("/orders/1", body="other service", Content_Type="text/plain")
    config = _config(other_server)
    config["allow_origins"] = [web_server.url("")]  # same host, another port
    tools = {t.name: t for t in build(config, ToolContext())}
    refused = await tools["get_order"].invoke({"order_id": "1"})
    assert refused.is_error and "URL refused" in refused.content
    assert other_server.requests == []


async def test_legacy_allow_hosts_open_only_the_endpoints_origins(web_server, other_server):
    """``allow_hosts: ["127.0.0.1"]`` once opened every port of the host."""
    web_server.route("/go", status=302, Location=other_server.url("/landing"))
    other_server.route("/landing", body="other service", Content_Type="text/plain")
    config = _redirecting(web_server, other_server, cross_origin_redirects="follow_without_headers")
    del config["allow_origins"]
    config["allow_hosts"] = ["127.0.0.1"]
    (tool,) = build(config, ToolContext())
    refused = await tool.invoke({})
    assert refused.is_error and "URL refused" in refused.content
    assert len(web_server.requests) == 1 and other_server.requests == []


# --- confirmation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ({"method": "GET"}, False),
        ({}, False),  # GET is the default method
        ({"method": "get"}, False),
        ({"method": "POST"}, True),
        ({"method": "PUT"}, True),
        ({"method": "PATCH"}, True),
        ({"method": "DELETE"}, True),
        ({"method": "HEAD"}, True),
        ({"method": "POST", "requires_confirmation": False}, False),
        ({"method": "GET", "requires_confirmation": True}, True),
    ],
)
def test_calls_other_than_get_need_confirmation_by_default(endpoint, expected):
    endpoint = {"name": "e", "url_template": "https://api.test/x", **endpoint}
    assert call_needs_confirmation(endpoint, {"any": "argument"}) is expected


def test_the_endpoint_schema_takes_the_new_settings():
    endpoint = {
        "name": "e",
        "url_template": "https://api.test/x",
        "requires_confirmation": False,
        "cross_origin_redirects": "follow_without_headers",
    }
    config = {"endpoints": [endpoint], "allow_origins": ["http://10.0.0.5:8080"]}
    assert config_schema_errors(SPEC, config) == []
    for bad in (
        {"endpoints": [{**endpoint, "requires_confirmation": "no"}]},
        {"endpoints": [{**endpoint, "cross_origin_redirects": "follow"}]},
        {"allow_origins": ["http://10.0.0.5:8080/path"]},
        {"allow_origins": ["10.0.0.5"]},
    ):
        assert config_schema_errors(SPEC, bad), bad


async def test_a_post_endpoint_waits_for_approval_in_the_run(web_server):
    """The built tools carry the rule: the loop asks before a POST, not before a GET."""
    tools = {t.name: t for t in build(_config(web_server), ToolContext())}

    assert tools["get_order"].confirmation_reason({"order_id": "7"}) is None
    reason = tools["create_ticket"].confirmation_reason({"title": "x"})
    assert reason and "POST" in reason
