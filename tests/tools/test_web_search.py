"""Search backends against loopback servers that speak each provider's JSON API."""

from __future__ import annotations

import json

import pytest

from tools.builtin.web_search import build, web_search
from tools.registry import ToolContext
from tools.search import get_backend
from tools.search.locmem import SearchBackend as LocmemBackend
from tools.search.metaso import metaso_answer


def _json(server, path, payload, status=200):
    server.route(path, status=status, body=json.dumps(payload), Content_Type="application/json")


async def test_searxng(web_server):
    _json(
        web_server,
        "/search",
        {
            "answers": ["Paris is the capital of France."],
            "results": [
                {"title": "Paris", "url": "https://en.wikipedia.org/wiki/Paris", "content": "City"},
                {"title": "No URL"},
            ],
        },
    )
    result = await web_search(
        "capital of france", {"backend": "searxng", "base_url": web_server.url("")}
    )
    assert "Answer: Paris is the capital of France." in result.content
    assert "1. Paris\n   https://en.wikipedia.org/wiki/Paris\n   City" in result.content
    assert "No URL" not in result.content
    assert web_server.requests[0].path.startswith("/search?q=capital+of+france&format=json")


async def test_metaso_sends_bearer_and_prefers_answer_then_summary_then_snippets(web_server):
    pages = [
        {"title": f"T{n}", "link": f"https://e.com/{n}", "snippet": f"snippet {n}"}
        for n in range(5)
    ]
    _json(web_server, "/api/v1/search", {"webpages": pages})
    config = {"backend": "metaso", "api_key": "mk-secret", "base_url": web_server.url("")}
    result = await web_search("q", config, max_results=4)
    request = web_server.requests[0]
    assert request.method == "POST" and request.headers["Authorization"] == "Bearer mk-secret"
    assert request.json() == {"q": "q", "scope": "webpage", "includeSummary": True, "size": 4}
    assert "Answer: snippet 0\nsnippet 1\nsnippet 2" in result.content
    assert "4. T3" in result.content and "T4" not in result.content


def test_metaso_priority():
    pages = [{"summary": "first summary", "snippet": "s0"}, {"snippet": "s1"}]
    assert metaso_answer({"answer": "direct", "webpages": pages}) == "direct"
    assert metaso_answer({"webpages": pages}) == "first summary"
    assert (
        metaso_answer(
            {"webpages": [{"snippet": "a"}, {"snippet": "b"}, {"snippet": "c"}, {"snippet": "d"}]}
        )
        == "a\nb\nc"
    )
    assert metaso_answer({}) == ""


async def test_tavily(web_server):
    _json(
        web_server,
        "/search",
        {"answer": "42", "results": [{"title": "H2G2", "url": "https://h.g/", "content": "life"}]},
    )
    result = await web_search(
        "meaning", {"backend": "tavily", "api_key": "tvly-1", "base_url": web_server.url("")}
    )
    assert "Answer: 42" in result.content and "https://h.g/" in result.content
    assert web_server.requests[0].headers["Authorization"] == "Bearer tvly-1"
    assert web_server.requests[0].json()["include_answer"] is True


async def test_brave(web_server):
    _json(
        web_server,
        "/res/v1/web/search",
        {"web": {"results": [{"title": "B", "url": "https://b.example/", "description": "d"}]}},
    )
    result = await web_search(
        "x", {"backend": "brave", "api_key": "BSA", "base_url": web_server.url("")}
    )
    assert "1. B\n   https://b.example/\n   d" in result.content
    assert web_server.requests[0].headers["X-Subscription-Token"] == "BSA"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "web search is not configured"),
        ({"backend": "tavily"}, "needs an API key"),
        ({"backend": "searxng"}, "needs a base URL"),
        ({"backend": "bing"}, "unknown search backend 'bing'"),
    ],
)
async def test_unconfigured_is_a_clear_observation(config, message):
    result = await web_search("anything", config)
    assert result.is_error and message in result.content


async def test_provider_failures(web_server):
    _json(web_server, "/search", {"error": "bad key"}, status=401)
    config = {"backend": "tavily", "api_key": "wrong", "base_url": web_server.url("")}
    refused = await web_search("x", config)
    assert refused.is_error and "refused the API key" in refused.content
    web_server.route("/search", body="<html>", Content_Type="text/html")
    garbled = await web_search("x", config)
    assert garbled.is_error and "not JSON" in garbled.content
    down = await web_search("x", {"backend": "searxng", "base_url": "http://127.0.0.1:9"})
    assert down.is_error and "could not reach searxng" in down.content


async def test_locmem_backend_records_and_the_tool_builds():
    LocmemBackend.queries.clear()
    config = {
        "backend": "locmem",
        "answer": "recorded",
        "results": [{"title": "t", "url": "https://u/", "snippet": "s"}],
    }
    (tool,) = build(config, ToolContext())
    result = await tool.invoke({"query": "hello", "max_results": 3})
    assert "Answer: recorded" in result.content
    assert LocmemBackend.queries == [{"query": "hello", "max_results": 3}]
    assert get_backend("locmem", {}).missing_configuration() is None
