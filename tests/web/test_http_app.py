"""HTTP under daphne: sync views on pooled threads, async views on the event loop."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
from asgiref.testing import ApplicationCommunicator

from agentsite import serverloop
from agentsite.http import DjangoHTTPApp
from tests.web import http_urls

pytestmark = [pytest.mark.urls("tests.web.http_urls"), pytest.mark.django_db(transaction=True)]


def client_for(app: DjangoHTTPApp) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")


async def test_sync_views_run_on_a_few_reused_threads_off_the_event_loop():
    app = DjangoHTTPApp(threads=3)
    async with client_for(app) as client:
        threads = set()
        for _ in range(12):
            response = await client.get("/sync/")
            assert response.status_code == 200
            threads.add(response.json()["thread"])
    assert 1 <= len(threads) <= 3  # pooled: each thread keeps its DB connection
    assert threading.current_thread().name not in threads


async def test_form_posts_and_cookies_pass_through_unchanged():
    async with client_for(DjangoHTTPApp(threads=2)) as client:
        response = await client.post("/sync/", data={"content": "héllo wörld", "n": "1"})
    assert response.json()["method"] == "POST"
    assert response.json()["body"] == {"content": "héllo wörld", "n": "1"}
    assert response.cookies["seen"] == "yes"


async def test_async_views_stream_each_chunk_as_it_is_produced():
    http_urls.second_chunk_allowed = asyncio.Event()
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": "/stream/", "raw_path": b"/stream/", "root_path": "",
        "query_string": b"", "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 5000), "server": ("testserver", 80),
    }  # fmt: skip
    app = ApplicationCommunicator(DjangoHTTPApp(threads=1), scope)
    await app.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await app.receive_output(5)
    assert start["type"] == "http.response.start" and start["status"] == 200
    first = await app.receive_output(5)
    assert first["body"] == b"first\n"  # before the view was allowed to produce the second
    http_urls.second_chunk_allowed.set()
    second = await app.receive_output(5)
    assert second["body"] == b"second\n"
    await app.wait(5)


async def test_a_sync_view_reaches_the_channel_layer_on_the_server_loop():
    """The in-memory layer's queues and the Redis publisher belong to the server loop."""
    serverloop.bind()
    async with client_for(DjangoHTTPApp(threads=2)) as client:
        response = await client.get("/loop/")
    assert response.json()["loop"] == id(asyncio.get_running_loop())
