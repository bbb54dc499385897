"""The front door: bearer or session auth, CSRF for sessions, rate limit, JSON errors."""

from __future__ import annotations

import re

import pytest
from django.test import Client, override_settings
from django.urls import URLPattern, get_resolver

from conversations.api import urls as api_urls
from conversations.http.tokens import token_create, token_revoke
from conversations.services import conversation_create

from .conftest import JsonClient

pytestmark = pytest.mark.django_db

ENDPOINTS = [
    ("get", "/api/conversations"),
    ("post", "/api/conversations"),
    ("get", "/api/conversations/1"),
    ("patch", "/api/conversations/1"),
    ("delete", "/api/conversations/1"),
    ("post", "/api/conversations/1/messages"),
    ("get", "/api/conversations/1/events"),
    ("post", "/api/runs/1/cancel"),
    ("post", "/api/messages/1/pin"),
    ("post", "/api/messages/1/unpin"),
    ("get", "/api/models"),
    ("get", "/api/tools"),
]


def call(api: JsonClient, method: str, path: str):
    return api.get(path) if method == "get" else getattr(api, method)(path)


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_anonymous_gets_401_json_not_a_login_redirect(anon_api, method, path):
    response = call(anon_api, method, path)
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert "Bearer" in response["WWW-Authenticate"]
    assert "Authorization: Bearer" in response.json()["error"]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_wrong_token_gets_401(client, method, path):
    response = call(JsonClient(client, "as_not-a-real-token"), method, path)
    assert response.status_code == 401
    assert "wrong or has been revoked" in response.json()["error"]


def test_revoked_token_gets_401(client, user):
    token, raw = token_create(user=user, name="x")
    api = JsonClient(client, raw)
    assert api.get("/api/conversations").status_code == 200
    token_revoke(token=token)
    assert api.get("/api/conversations").status_code == 401


def test_other_schemes_and_empty_bearer_are_refused(client, token):
    for header in ("Basic YWxpY2U6cHc=", "Bearer", "Bearer ", "Token " + token, token):
        response = client.get("/api/conversations", headers={"Authorization": header})
        assert response.status_code == 401, header


def test_bad_token_is_refused_even_with_a_valid_session(user_client):
    response = user_client.get("/api/conversations", headers={"Authorization": "Bearer as_nope"})
    assert response.status_code == 401


def test_session_auth_works_for_reads(user_client, user):
    conversation_create(owner=user, title="mine")
    response = user_client.get("/api/conversations")
    assert response.status_code == 200
    assert [c["title"] for c in response.json()["conversations"]] == ["mine"]


def test_session_writes_need_csrf_but_bearer_writes_do_not(user, token):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    refused = browser.post("/api/conversations", "{}", content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]

    browser.get("/settings/tokens/")  # any page sets the CSRF cookie
    csrf = browser.cookies["csrftoken"].value
    accepted = browser.post(
        "/api/conversations", "{}", content_type="application/json", headers={"X-CSRFToken": csrf}
    )
    assert accepted.status_code == 201

    script = Client(enforce_csrf_checks=True)
    response = JsonClient(script, token).post("/api/conversations", {"title": "from a script"})
    assert response.status_code == 201


def test_method_not_allowed_is_json(api):
    response = api.delete("/api/models")
    assert response.status_code == 405
    assert response["Allow"] == "GET" and "not allowed" in response.json()["error"]


def test_unknown_api_path_is_json_404(anon_api, api):
    for client in (anon_api, api):
        response = client.get("/api/nope/nothing")
        assert response.status_code == 404 and "error" in response.json()


@override_settings(AGENTSITE_API_RATE_LIMIT=3)
def test_rate_limit_per_token_with_retry_after(client, user, token):
    api = JsonClient(client, token)
    for _ in range(3):
        ok = api.get("/api/models")
        assert ok.status_code == 200
    assert ok["X-RateLimit-Limit"] == "3"

    limited = api.get("/api/models")

    assert limited.status_code == 429
    retry_after = int(limited["Retry-After"])
    assert 1 <= retry_after <= 120  # the sliding window may reach into the next minute
    assert "Too many requests" in limited.json()["error"]
    # The limit is per token: a second token of the same user has its own budget.
    second = JsonClient(client, token_create(user=user, name="b")[1])
    assert second.get("/api/models").status_code == 200


@override_settings(AGENTSITE_API_RATE_LIMIT=2)
def test_rate_limit_applies_to_sessions_per_user(user_client):
    assert user_client.get("/api/models").status_code == 200
    assert user_client.get("/api/models").status_code == 200
    assert user_client.get("/api/models").status_code == 429


def test_sliding_window_retry_after_is_exact():
    from conversations.http.ratelimit import rate_limit_hit

    start = 6000.0  # the beginning of a minute
    for i in range(4):
        assert rate_limit_hit("unit", limit=4, now=start + i).allowed
    refused = rate_limit_hit("unit", limit=4, now=start + 30)
    assert not refused.allowed
    # 4 requests this minute: one more fits once the minute is over and a quarter of
    # the next has passed (4 * 3/4 = 3 weighted, + 1 = 4).
    assert refused.retry_after == 30 + 15
    assert not rate_limit_hit("unit", limit=4, now=start + 60 + 14).allowed
    assert rate_limit_hit("unit", limit=4, now=start + 60 + 15).allowed


def test_schema_is_public_openapi_and_covers_every_route(client):
    response = client.get("/api/schema")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.1")
    documented = set(document["paths"])
    routes = set()
    for pattern in api_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        route = str(pattern.pattern)
        if route.startswith("^"):  # the JSON 404 catch-all
            continue
        routes.add("/api/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route))
    assert routes == documented
    schemes = document["components"]["securitySchemes"]
    assert schemes["BearerAuth"]["scheme"] == "bearer"
    assert schemes["SessionAuth"] == {"type": "apiKey", "in": "cookie", "name": "sessionid"}
    # Every operation but the document itself takes a token or a session, and says so.
    for path, operations in document["paths"].items():
        for operation in operations.values():
            security = [{"BearerAuth": []}, {"SessionAuth": []}]
            assert operation.get("security") == (None if path == "/api/schema" else security)
    assert get_resolver().resolve("/api/schema").url_name == "api_schema"


@pytest.mark.django_db(transaction=True)
async def test_the_event_stream_passes_the_front_door_once(sse, token, user, settings):
    """The stream is an operation of the API like the others: the request is counted
    against the rate limit once."""
    from asgiref.sync import sync_to_async

    settings.AGENTSITE_API_RATE_LIMIT = 5
    conversation = await sync_to_async(conversation_create)(owner=user)
    stream = await sse(f"/api/conversations/{conversation.pk}/events", token=token)
    assert stream.status == 200
    assert stream.headers["x-ratelimit-limit"] == "5"
    assert stream.headers["x-ratelimit-remaining"] == "4"
    assert await stream.rest() == []
