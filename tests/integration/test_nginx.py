"""deploy/nginx.conf in front of the team stack: two ASGI servers, two Celery workers,
Redis and PostgreSQL on loopback, nginx (Debian's package) started unprivileged on a free
port with the configuration rendered as a host renders it (tests/deploy/nginx.py).

Conversations are driven through nginx only, over websockets and SSE, and streams move
to the other server: a client that drops resumes on whichever server nginx picks, and when
one server is killed mid-answer nginx sends every reconnect to the other. Each answer
arrives whole, nothing lost or doubled. A snippet (the folder every site's TLS settings go
in) adds an ``X-Upstream`` header, so the test knows which server answered each stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus

from tests.deploy.nginx import Nginx, configured_nginx, raw_exchange
from tests.integration.observers import EventStream, assembled, assert_consistent, shown_answer
from tests.integration.stack import (
    CSRF_INPUT,
    LOOPBACK,
    Browser,
    Stack,
    async_wait_for,
    run_id_of,
    running_stack,
    stop_reading,
)

pytestmark = pytest.mark.integration

WORDS = 120
ANSWER = "".join(f"word{i} " for i in range(WORDS))
# The sweep (a dead worker's runs) on the fault tests' fast clock; the proxy counts as one hop.
STACK_ENV = {
    "AGENTSITE_RUN_STALE_SECONDS": "3",
    "AGENTSITE_RUN_SWEEP_SECONDS": "0.5",
    "AGENTSITE_RUN_HEARTBEAT_SECONDS": "0.5",
    "AGENTSITE_TRUSTED_PROXY_HOPS": "1",
}
UPSTREAM_HEADER = "add_header X-Upstream $upstream_addr always;\n"


@pytest.fixture(scope="module")
def proxied() -> Iterator[tuple[Stack, Nginx]]:
    with running_stack(mode="team", servers=2, workers=2, extra_env=STACK_ENV) as stack:
        upstreams = [url.removeprefix("http://") for url in stack.server_urls.values()]
        with configured_nginx(upstreams, snippets={"upstream.conf": UPSTREAM_HEADER}) as nginx:
            nginx.start()
            yield stack, nginx


@pytest.fixture
def stack(proxied) -> Stack:
    return proxied[0]


@pytest.fixture
def nginx(proxied) -> Nginx:
    return proxied[1]


@pytest.fixture
async def browser(nginx: Nginx) -> Any:
    async with Browser(nginx.url) as client:
        await client.login()
        yield client


def slow_answer(marker: str, *, times: int = 1, delay: float = 0.04) -> dict[str, Any]:
    """A rule: ``times`` answers of WORDS words, streamed slowly."""
    chunks = [f"word{i} " for i in range(WORDS)]
    response = {"chunks": chunks, "chunk_delay": delay}
    return {"contains": marker, "in": "any", "responses": [response] * times}


def server_of(stack: Stack, upstream: str) -> str:
    """The stack's name of the server that answered: ``upstream`` is nginx's
    ``$upstream_addr``, every server tried, the one that answered last."""
    upstream = upstream.split(",")[-1].strip()
    for name, url in stack.server_urls.items():
        if url.removeprefix("http://") == upstream:
            return name
    raise AssertionError(f"{upstream!r} is none of {stack.server_urls}")


class Upstreams:
    """Which server nginx gave each event stream connection (its X-Upstream header)."""

    def __init__(self, browser: Browser) -> None:
        self.by_path: dict[str, list[str]] = {}
        browser.http.event_hooks["response"].append(self._seen)

    async def _seen(self, response: httpx.Response) -> None:
        path = response.request.url.path
        if path.endswith("/events"):
            self.by_path.setdefault(path, []).append(response.headers.get("x-upstream", "?"))

    def of(self, conversation_id: int) -> list[str]:
        return self.by_path.get(f"/api/conversations/{conversation_id}/events", [])


class Page:
    """A chat page's websocket as htmx's ws extension keeps it: reconnected after a drop
    with the URL the page was loaded with (``?after=`` of the page), frames kept in order
    over every connection, and the server each connection reached."""

    def __init__(self, browser: Browser, conversation_id: int) -> None:
        self.browser = browser
        self.conversation_id = conversation_id
        self.connections: list[tuple[str, list[str]]] = []  # (upstream, frames)
        self._ws: Any = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Page:
        await self._connect_once()
        self._task = asyncio.ensure_future(self._keep_connected())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await stop_reading(self._task)
        if self._ws is not None:
            await self._ws.close()

    async def _connect_once(self) -> None:
        self._ws = await self.browser.socket(self.conversation_id).__aenter__()
        self.connections.append((self._ws.response.headers.get("x-upstream", "?"), []))

    async def _keep_connected(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                async for frame in self._ws:
                    self.connections[-1][1].append(frame)
            await asyncio.sleep(0.2)  # the extension waits before it reconnects, too
            with contextlib.suppress(Exception):
                await self._connect_once()

    @property
    def upstreams(self) -> list[str]:
        return [upstream for upstream, _frames in self.connections]

    def frames(self) -> list[str]:
        return [frame for _upstream, frames in self.connections for frame in frames]

    async def wait(self, predicate: Any, *, timeout: float, what: str) -> str:
        async def found() -> str | None:
            return next((f for f in self.frames() if predicate(f)), None)

        return await async_wait_for(found, timeout=timeout, what=what)


def finished(run_id: int) -> Any:
    return lambda frame: shown_answer(frame, run_id) is not None


def last_shown(page: Page, run_id: int) -> str | None:
    """What the page shows for the run once every frame is applied."""
    shown = [shown_answer(frame, run_id) for frame in page.frames()]
    return [answer for answer in shown if answer is not None][-1]


async def test_a_client_that_drops_resumes_on_the_other_server(
    stack: Stack, nginx: Nginx, browser: Browser
) -> None:
    """An SSE client drops mid-answer and reconnects with Last-Event-ID; nginx gives it
    the other server: it receives exactly the rest. A second page, on the other server
    than the first, shows the same answer."""
    marker = f"NGINX-MOVE-{secrets.token_hex(3)}"
    stack.script(rules=[slow_answer(marker)])
    conversation_id = await browser.new_conversation()
    path = f"/api/conversations/{conversation_id}/events?follow=1"
    events: list[tuple[int, str, dict[str, Any]]] = []
    servers: list[str] = []

    async def read(until_words: int | None) -> None:
        """One connection: from the last event seen, until ``until_words`` answer words
        (then drop) or the run's end. A connection to the server of the previous one is
        closed before reading and tried again, so the stream moves."""
        for _attempt in range(6):
            headers = {"Last-Event-ID": str(events[-1][0] if events else 0)}
            async with browser.http.stream("GET", path, headers=headers, timeout=None) as resp:
                assert resp.status_code == 200, resp.status_code
                server = server_of(stack, resp.headers["x-upstream"])
                if servers and server == servers[-1]:
                    continue
                servers.append(server)
                fields: dict[str, str] = {}
                async for line in resp.aiter_lines():
                    if line:
                        name, _, value = line.partition(": ")
                        fields[name] = value
                        continue
                    if "id" in fields:
                        payload = json.loads(fields["data"])
                        events.append((int(fields["id"]), fields["event"], payload))
                        if fields["event"] in ("done", "error"):
                            return
                        if until_words and assembled(events).count("word") >= until_words:
                            return  # the client drops the connection
                    fields = {}
                return
        raise AssertionError(f"nginx never gave another server than {servers}")

    async with Page(browser, conversation_id) as one:
        second = None
        for _attempt in range(6):  # a page on the other server than the first
            candidate = Page(browser, conversation_id)
            await candidate.__aenter__()
            if candidate.upstreams[0] != one.upstreams[0]:
                second = candidate
                break
            await candidate.__aexit__(None, None, None)
        assert second is not None, "nginx never gave the second page the other server"
        try:
            run_id = run_id_of(await browser.send(conversation_id, f"{marker}: move"))
            await asyncio.wait_for(read(until_words=30), 30)
            await asyncio.wait_for(read(until_words=None), 60)
            done = [
                await page.wait(finished(run_id), timeout=30, what="the finished answer")
                for page in (one, second)
            ]
        finally:
            await second.__aexit__(None, None, None)

    assert len(servers) == 2 and servers[0] != servers[1], servers
    ids = [event_id for event_id, _e, _p in events]
    assert ids == sorted(set(ids)), "no event twice, none out of order"
    assert assembled(events) == ANSWER and events[-1][2]["answer"] == ANSWER
    assert [shown_answer(frame, run_id) for frame in done] == [ANSWER.strip()] * 2
    assert [last_shown(page, run_id) for page in (one, second)] == [ANSWER.strip()] * 2
    [(stored,)] = stack.query(
        "SELECT content FROM conversations_message WHERE run_id = %s AND role = 'assistant'",
        run_id,
    )
    assert stored == ANSWER


async def test_a_huge_content_length_is_refused_by_nginx(
    stack: Stack, nginx: Nginx, browser: Browser
) -> None:
    """Issue 42's left-over: a declared body of any size past the limit is refused by
    nginx at once (413, or 400 past 64 bits), never reaching a server; a body the app
    reads gets the app's own 413; both servers stay healthy and a chat goes on."""
    cookies = "; ".join(f"{k}={v}" for k, v in browser.http.cookies.items())
    csrf = browser.http.cookies["csrftoken"]
    before = len(nginx.access_log())
    answers = {}
    for length in ("1000000000000000", "99999999999999999999"):
        head = (
            f"POST /api/conversations HTTP/1.1\r\nHost: {LOOPBACK}:{nginx.port}\r\n"
            f"Cookie: {cookies}\r\nX-CSRFToken: {csrf}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
        )
        answers[length] = await asyncio.to_thread(raw_exchange, nginx.port, head.encode())
    assert answers["1000000000000000"].startswith(b"HTTP/1.1 413 ")
    assert b"The request body is too large (the limit is 1300k)." in answers["1000000000000000"]
    assert answers["99999999999999999999"].startswith(b"HTTP/1.1 400 ")
    refused = await async_wait_for(
        lambda: nginx.access_log()[before:] if len(nginx.access_log()) >= before + 2 else None,
        timeout=5,
        what="the refusals in nginx's access log",
    )
    assert [(e["status"], e["upstream"]) for e in refused] == [("413", "-"), ("400", "-")]

    # Past the app's limit, within nginx's: the app reads the declared length and refuses.
    body = json.dumps({"title": "x" * 1_300_000}).encode()
    headers = {"X-CSRFToken": csrf, "Content-Type": "application/json"}
    response = await browser.http.post("/api/conversations", content=body, headers=headers)
    assert response.status_code == 413, response.text[:300]
    error = response.json()["error"]
    assert "too large" in error and "1300k" not in error  # the app's words, not nginx's
    await async_wait_for(
        lambda: any(
            e["status"] == "413" and e["upstream"] != "-" for e in nginx.access_log()[before:]
        ),
        timeout=5,
        what="the app's 413 in nginx's access log",
    )

    for url in stack.server_urls.values():
        page = httpx.get(f"{url}/accounts/login/", trust_env=False, timeout=10)
        assert page.status_code == 200
    marker = f"NGINX-AFTER-{secrets.token_hex(3)}"
    stack.script(rules=[{"contains": marker, "in": "any", "responses": ["Still serving."]}])
    conversation_id = await browser.new_conversation()
    async with EventStream(browser, conversation_id) as stream:
        await browser.send(conversation_id, f"{marker}: hello")
        await async_wait_for(stream.ended, timeout=30, what="the answer", detail=stack.logs)
    assert stream.events[-1][2]["answer"] == "Still serving."


async def test_the_client_cannot_choose_its_address_or_scheme(
    stack: Stack, nginx: Nginx, browser: Browser
) -> None:
    """nginx appends the address it saw to X-Forwarded-For and sets X-Forwarded-Proto: a
    client that claims other addresses is still locked out after the failure limit, and
    one that claims HTTPS cannot open a socket from an https:// page."""
    username = f"mallory-{secrets.token_hex(3)}"
    async with httpx.AsyncClient(base_url=nginx.url, trust_env=False) as client:
        statuses = []
        for attempt in range(6):
            page = await client.get("/accounts/login/")
            token = CSRF_INPUT.search(page.text)
            assert token, page.status_code
            response = await client.post(
                "/accounts/login/",
                data={"username": username, "password": "wrong", "csrfmiddlewaretoken": token[1]},
                headers={"X-Forwarded-For": f"198.51.100.{attempt + 1}"},
            )
            statuses.append(response.status_code)
    assert statuses[-1] == 429, statuses  # one address, whatever the header claimed
    assert "Too many failed logins" in response.text

    cookie = "; ".join(f"{k}={v}" for k, v in browser.http.cookies.items())
    conversation_id = await browser.new_conversation()
    from websockets.asyncio.client import connect

    ws_url = f"ws://{LOOPBACK}:{nginx.port}/ws/conversations/{conversation_id}/"
    with pytest.raises(InvalidStatus) as refused:
        async with connect(
            ws_url,
            origin=f"https://{LOOPBACK}:{nginx.port}",  # type: ignore[arg-type]
            additional_headers={"Cookie": cookie, "X-Forwarded-Proto": "https"},
            proxy=None,
            open_timeout=10,
        ):
            pass
    assert refused.value.response.status_code == 403
    async with browser.socket(conversation_id) as ws:  # its own http:// origin: accepted
        assert ws.response.status_code == 101


async def test_streams_resume_on_the_other_server_when_one_dies(
    stack: Stack, nginx: Nginx, browser: Browser
) -> None:
    """Four conversations stream through nginx, spread over both servers; kill -9 of the
    first server mid-answer: its SSE clients resume with Last-Event-ID and its pages
    reconnect, each through nginx, which now sends them to the other server. Every SSE
    client ends with exactly the answer stored, every page shows it whole. (Last in the
    module: nginx leaves the killed server out for a while after it is back.)"""
    marker = f"NGINX-KILL-{secrets.token_hex(3)}"
    stack.script(rules=[slow_answer(marker, times=4)])
    upstreams = Upstreams(browser)
    conversations = [await browser.new_conversation() for _ in range(4)]
    async with contextlib.AsyncExitStack() as scope:
        # One connection after the other, nothing in between: nginx's round robin puts
        # every other stream of each kind on each server.
        streams, pages = {}, {}
        for conversation_id in conversations:
            stream = EventStream(browser, conversation_id)
            streams[conversation_id] = await scope.enter_async_context(stream)
            await async_wait_for(
                lambda c=conversation_id: upstreams.of(c), timeout=10, what="the SSE response"
            )
        for conversation_id in conversations:
            pages[conversation_id] = await scope.enter_async_context(Page(browser, conversation_id))
        for kind, servers in (
            ("SSE", [server_of(stack, upstreams.of(c)[0]) for c in conversations]),
            ("websocket", [server_of(stack, pages[c].upstreams[0]) for c in conversations]),
        ):
            assert sorted(servers) == ["daphne", "daphne", "daphne2", "daphne2"], (kind, servers)
        runs = {}
        for conversation_id in conversations:
            response = await browser.send(conversation_id, f"{marker}: talk")
            runs[conversation_id] = run_id_of(response)
        await async_wait_for(
            lambda: all(s.answer().count("word") >= 10 for s in streams.values()),
            timeout=30,
            what="ten words on every stream",
            detail=stack.logs,
        )

        stack.daphne.kill()  # mid-answer, no goodbye to its clients
        try:
            await async_wait_for(
                lambda: all(s.ended() for s in streams.values()),
                timeout=60,
                what="every run's end on its event stream",
                detail=lambda: stack.logs() + nginx.logs(),
            )
            for conversation_id, page in pages.items():
                await page.wait(
                    finished(runs[conversation_id]),
                    timeout=30,
                    what=f"the finished answer on page {conversation_id}",
                )
        finally:
            stack.restart_server("daphne")

    for conversation_id in conversations:
        stream, page = streams[conversation_id], pages[conversation_id]
        sse_servers = [server_of(stack, u) for u in upstreams.of(conversation_id)]
        page_servers = [server_of(stack, u) for u in page.upstreams]
        # A stream on the killed server moved to the other one; the other ones stayed.
        for servers, what in ((sse_servers, "SSE"), (page_servers, "websocket")):
            assert servers[-1] == "daphne2", (what, servers)
            assert (len(servers) > 1) == (servers[0] == "daphne"), (what, servers)
        [events] = stream.runs()
        assert assembled(events) == ANSWER  # every delta once, in order, across the move
        assert events[-1][1] == "done" and events[-1][2]["answer"] == ANSWER
        assert_consistent(stack, conversation_id, [f"{marker}: talk"], stream)
        assert last_shown(page, runs[conversation_id]) == ANSWER.strip()
