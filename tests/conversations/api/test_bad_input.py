"""Bad input is a 4xx, never a 500: JSON on /api/, a readable page or the composer's error
line elsewhere, and nothing saved.

Each case here was a 500: a lone surrogate in JSON, deep nesting, ids and numbers past 64
bits in paths, query strings and headers.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver

from conversations.models import Conversation, Message, Run
from conversations.services import conversation_create
from core.converters import DB_ID_MAX

pytestmark = pytest.mark.django_db

BIG = "99999999999999999999"  # more than 2**64
TOO_LARGE_IDS = [BIG, str(DB_ID_MAX + 1), "9" * 5000]


@pytest.fixture
def mine(user):
    return conversation_create(owner=user, title="mine")


def counts() -> tuple[int, int, int]:
    return Conversation.objects.count(), Message.objects.count(), Run.objects.count()


def is_json_error(response) -> bool:
    return response["Content-Type"] == "application/json" and bool(response.json()["error"])


# ------------------------------------------------------------------- JSON bodies


@pytest.mark.parametrize(
    "body",
    [
        '{"content": "\\ud800"}',
        '{"content": "ok \\udfff then"}',
        '{"content": "x", "\\ud800": 1}',
        '{"content": ["\\ud800"]}',
        b'{"content": "\xed\xa0\x80"}',  # the same surrogate as raw (CESU-8) bytes
    ],
)
def test_a_lone_surrogate_is_400_and_saves_nothing(api, mine, body):
    before = counts()
    response = api.post(f"/api/conversations/{mine.pk}/messages", body)
    assert response.status_code == 400 and is_json_error(response)
    assert "surrogate" in response.json()["error"]
    assert counts() == before


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/conversations/{id}/messages", '{"content": "x", "extra": 1e999}'),
        ("/api/conversations/import", '{"format": "agentsite.conversation", "n": -1e400}'),
    ],
)
def test_a_number_past_a_floats_range_is_400_and_saves_nothing(api, mine, path, body):
    """``1e999`` is valid JSON that Python reads as infinity: no column stores it."""
    before = counts()
    response = api.post(path.format(id=mine.pk), body)
    assert response.status_code == 400 and is_json_error(response)
    assert "too large to store" in response.json()["error"]
    assert counts() == before


def test_a_lone_surrogate_in_a_title_is_400(api, mine):
    created = api.post("/api/conversations", '{"title": "\\ud800"}')
    renamed = api.patch(f"/api/conversations/{mine.pk}", '{"title": "a\\udbff"}')
    assert created.status_code == renamed.status_code == 400
    assert "surrogate" in created.json()["error"] and "surrogate" in renamed.json()["error"]
    mine.refresh_from_db()
    assert mine.title == "mine" and Conversation.objects.count() == 1


def test_a_valid_surrogate_pair_is_text(api, mine):
    response = api.post(f"/api/conversations/{mine.pk}/messages", '{"content": "\\ud83d\\ude00"}')
    assert response.status_code == 202
    assert Message.objects.get(pk=response.json()["message_id"]).content == "\U0001f600"


@pytest.mark.parametrize(
    "body",
    [
        "[" * 100_000 + "]" * 100_000,  # json.loads raised RecursionError
        '{"title": ' + "[" * 900 + "]" * 900 + "}",
        '{"title": ' + '{"a": ' * 40 + "1" + "}" * 40 + "}",
    ],
)
def test_deep_nesting_is_400(api, body):
    response = api.post("/api/conversations", body)
    assert response.status_code == 400 and is_json_error(response)
    assert Conversation.objects.count() == 0


@pytest.mark.parametrize(
    "body", ['{"title": NaN}', '{"model": Infinity}', '{"model": ' + "9" * 5000 + "}"]
)
def test_non_json_numbers_are_400(api, body):
    response = api.post("/api/conversations", body)
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]


@pytest.mark.parametrize("model", [int(BIG), BIG, DB_ID_MAX, -1, 1.5])
def test_a_model_id_past_64_bits_is_400(api, mine, model):
    response = api.patch(f"/api/conversations/{mine.pk}", {"model": model})
    assert response.status_code == 400 and "model" in response.json()["fields"]


# ------------------------------------------------------------------ body sizes


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1_000)
def test_a_body_django_will_not_read_is_413_json(api, mine):
    """Over DATA_UPLOAD_MAX_MEMORY_SIZE (under the API's own limit): refused unread."""
    before = counts()
    response = api.post(f"/api/conversations/{mine.pk}/messages", {"content": "z" * 2_000})
    assert response.status_code == 413 and "too large" in response.json()["error"]
    assert counts() == before


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1_000)
def test_a_session_form_post_too_large_is_413_json_on_the_api(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/")  # the CSRF cookie: the check then looks for the token in the form
    response = client.post("/api/conversations", {"title": "t" * 2_000})
    assert response.status_code == 413 and is_json_error(response)


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1_000)
def test_a_form_too_large_is_413_under_the_composer_or_a_page(user_client, mine):
    path = f"/c/{mine.pk}/messages/"
    htmx = user_client.post(path, {"content": "z" * 2_000}, headers={"HX-Request": "true"})
    assert htmx.status_code == 413 and htmx["HX-Reswap"] == "none"
    assert 'id="form-error"' in htmx.text and "too large" in htmx.text
    page = user_client.post(path, {"content": "z" * 2_000})
    assert page.status_code == 413 and "<h1>Too large (413)</h1>" in page.text
    assert Message.objects.count() == 0


def test_the_body_limit_follows_the_message_limit():
    from django.conf import settings

    from conversations.http.body import body_max_bytes

    assert body_max_bytes() == settings.DATA_UPLOAD_MAX_MEMORY_SIZE


# ------------------------------------------------------------- ids in the URLs


def _routes(patterns, prefix: str = "") -> list[str]:
    """Every route of the project's URLconf (the admin's own routes are Django's)."""
    found: list[str] = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            if pattern.namespace != "admin":
                found += _routes(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            found.append(route)
    return found


def _all_routes() -> list[str]:
    from agentsite.asgi import ASYNC_ROUTES
    from conversations.routing import websocket_urlpatterns

    patterns = [*get_resolver().url_patterns, *ASYNC_ROUTES, *websocket_urlpatterns]
    return _routes(patterns)


ID_ROUTES = sorted({route for route in _all_routes() if "<id:" in route and "ws/" not in route})


def test_no_route_takes_an_unbounded_int():
    """``<int:...>`` passes any number of digits to the view: ids use ``<id:...>``."""
    assert not [route for route in _all_routes() if "<int:" in route]
    assert len(ID_ROUTES) >= 15


def _concrete(route: str, id_value: str) -> str:
    path = re.sub(r"<id:\w+>", id_value, re.sub(r"<str:\w+>", "call-1", route))
    return "/" + path


@pytest.mark.parametrize("route", ID_ROUTES)
def test_an_id_no_row_can_have_is_404(user_client, token, route):
    headers = {"Authorization": f"Bearer {token}"} if route.startswith("api/") else {}
    for id_value in TOO_LARGE_IDS:
        path = _concrete(route, id_value)
        for method in ("get", "post"):
            response = getattr(user_client, method)(path, headers=headers)
            assert response.status_code == 404, (method, path[:80])
            if route.startswith("api/"):
                assert is_json_error(response)
            else:
                assert "Not found (404)" in response.text
    if not route.endswith("/events"):  # an async view: see test_event_ids_out_of_range
        # The largest id a row could have reaches the view: an ordinary 404 (or 405).
        response = user_client.get(_concrete(route, str(DB_ID_MAX)), headers=headers)
        assert response.status_code in (404, 405)


def test_a_404_under_htmx_is_the_composer_line_not_a_page(user_client):
    response = user_client.post(
        "/c/123456/messages/", {"content": "hi"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 404 and response["HX-Reswap"] == "none"
    assert 'id="form-error"' in response.text and "<html" not in response.text


def test_an_unexpected_error_is_json_on_the_api_and_a_page_elsewhere(user, token, monkeypatch):
    def broken(**_kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr("conversations.selectors.conversation_list", broken)
    client = Client(raise_request_exception=False)
    client.force_login(user)
    api = client.get("/api/conversations", headers={"Authorization": f"Bearer {token}"})
    assert api.status_code == 500 and is_json_error(api)
    page = client.get("/")
    assert page.status_code == 500 and "Server error (500)" in page.text


# ------------------------------------------------------- numbers in the query


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("offset", BIG),
        ("offset", str(DB_ID_MAX)),
        ("offset", "-1"),
        ("offset", "9" * 5000),
        ("offset", "many"),
        ("limit", BIG),
        ("limit", "0"),
        ("limit", "501"),
        ("limit", "-" + BIG),
    ],
)
def test_paging_numbers_out_of_range_are_400(api, mine, name, value):
    response = api.get("/api/conversations", **{name: value})
    assert response.status_code == 400 and name in response.json()["fields"]


def test_paging_at_its_bounds_works(api, mine):
    from conversations.api.routes_conversations import LIST_OFFSET_MAX

    page = api.get("/api/conversations", limit="500", offset=str(LIST_OFFSET_MAX)).json()
    assert page["conversations"] == [] and page["count"] == 1


@pytest.mark.parametrize(
    ("raw", "after"), [(BIG.encode(), 0), (b"-5", 0), (b"x", 0), (b"\xff", 0), (b"7", 7)]
)
def test_a_websocket_after_out_of_range_means_from_the_start(raw, after):
    from conversations.live.consumers import _after

    assert _after({"query_string": b"after=" + raw}) == after


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("value", [BIG, str(DB_ID_MAX + 1), "-1", "x"])
async def test_event_ids_out_of_range_are_400(sse, token, user, value):
    from asgiref.sync import sync_to_async

    conversation = await sync_to_async(conversation_create)(owner=user)
    path = f"/api/conversations/{conversation.pk}/events"
    by_query = await sse(f"{path}?after={value}", token=token)
    assert by_query.status == 400 and b'"after"' in await by_query.body()
    by_header = await sse(path, token=token, headers={"Last-Event-ID": value})
    assert by_header.status == 400 and b"Last-Event-ID" in await by_header.body()
    at_bound = await sse(f"{path}?after={DB_ID_MAX}", token=token)
    assert at_bound.status == 200 and await at_bound.rest() == []
    no_such = await sse(f"/api/conversations/{DB_ID_MAX}/events", token=token)
    assert no_such.status == 404


@pytest.mark.django_db(transaction=True)
async def test_a_websocket_to_an_impossible_id_is_refused_not_an_error():
    from channels.testing import WebsocketCommunicator

    from agentsite.asgi import application

    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    for path in (f"/ws/conversations/{BIG}/", "/ws/nowhere/"):
        communicator = WebsocketCommunicator(application, path, headers=headers)
        connected, code = await communicator.connect()
        assert not connected and code == 4404
        await communicator.disconnect()
