"""Issue 42's last item on a server that faces its clients itself (``make run``): a body
declared past ``AGENTSITE_SERVER_MAX_BODY_BYTES`` gets a 413 at once, before a byte of
it is sent, and nothing of it reaches daphne; a body the app reads still gets the app's
own 413; keep-alive, pipelined, chunked requests and websockets go on as before.

A real ``agentsite-server`` (embedded mode), raw sockets.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tests.integration.stack import LOOPBACK, Browser, Frames, Stack, run_id_of, running_stack

pytestmark = pytest.mark.integration

LIMIT = 2_000_000  # bytes: small, so a body just past it is quick to send
ANSWER_WITHIN = 5  # seconds to wait for an answer that needs no body


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    env = {"AGENTSITE_SERVER_MAX_BODY_BYTES": str(LIMIT)}
    with running_stack(mode="embedded", extra_env=env) as running:
        yield running


def port_of(stack: Stack) -> int:
    return urlsplit(stack.base_url).port or 80


def read_answer(sock: socket.socket) -> tuple[bytes, bytes]:
    """One HTTP answer from ``sock``: its head and the body its Content-Length says
    (none without one)."""
    received = b""
    while b"\r\n\r\n" not in received:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError(f"closed before an answer: {received!r}")
        received += data
    head, _, body = received.partition(b"\r\n\r\n")
    lengths = [
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    ]
    length = lengths[0] if lengths else 0
    while len(body) < length:
        data = sock.recv(65536)
        if not data:
            break
        body += data
    return head, body[:length]


def request_head(stack: Stack, method: str, path: str, length: int | str) -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: {LOOPBACK}:{port_of(stack)}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def connect(stack: Stack) -> socket.socket:
    return socket.create_connection((LOOPBACK, port_of(stack)), timeout=ANSWER_WITHIN)


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("length", ["5000000000", "1000000000000000", "99999999999999999999"])
def test_a_huge_declared_body_is_refused_at_once(stack: Stack, length: str) -> None:
    with connect(stack) as sock:
        sock.sendall(request_head(stack, "POST", "/api/conversations/import", length))
        head, body = read_answer(sock)  # no body sent: an answer within the timeout
        assert head.startswith(b"HTTP/1.1 413 "), head
        assert b"connection: close" in head.lower()
        assert json.loads(body) == {
            "error": f"The request body is too large (the limit is {LIMIT:,} bytes)."
        }
        assert closed_by_server(sock)
    # Nothing of it reached daphne: its access log has no such request.
    assert "/api/conversations/import" not in stack.daphne.text()


@pytest.mark.parametrize("length", ["5e9", "-1"])
def test_a_length_that_is_no_number_is_a_bad_request_at_once(stack: Stack, length: str) -> None:
    with connect(stack) as sock:
        sock.sendall(request_head(stack, "POST", "/api/conversations/import", length))
        head, _ = read_answer(sock)
    assert head.startswith(b"HTTP/1.1 400 "), head


def test_a_body_just_past_the_limit_is_refused_before_it_is_sent(stack: Stack) -> None:
    with connect(stack) as sock:
        sock.sendall(request_head(stack, "POST", "/api/conversations", LIMIT + 1))
        head, _ = read_answer(sock)
        assert head.startswith(b"HTTP/1.1 413 "), head


async def test_within_the_limit_the_app_reads_the_body_and_answers_for_itself(
    stack: Stack,
) -> None:
    """Past the app's own limit for a JSON body, within the server's: the app's 413."""
    body = json.dumps({"title": "x" * 1_300_000}).encode()
    assert len(body) < LIMIT
    async with Browser(stack.base_url) as browser:
        await browser.login()
        headers = {
            "X-CSRFToken": browser.http.cookies["csrftoken"],
            "Content-Type": "application/json",
        }
        response = await browser.http.post("/api/conversations", content=body, headers=headers)
    assert response.status_code == 413, response.text[:300]
    assert "the limit is 1,265,536 bytes" in response.json()["error"]  # the app's words


def test_a_kept_alive_connection_is_checked_at_every_request(stack: Stack) -> None:
    with connect(stack) as sock:
        for _ in range(2):  # answered in turn, on one connection
            sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: {LOOPBACK}\r\n\r\n".encode())
            head, _ = read_answer(sock)
            assert head.startswith(b"HTTP/1.1 200 "), head
        sock.sendall(request_head(stack, "POST", "/api/conversations", "5000000000"))
        head, _ = read_answer(sock)
        assert head.startswith(b"HTTP/1.1 413 "), head


def test_a_chunked_body_is_cut_off_when_it_passes_the_limit(stack: Stack) -> None:
    """A chunked body declares no length: it is refused once it has passed the limit,
    long before it ends (it would go on for a gigabyte)."""
    chunk = b"x" * 65536
    framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    sent = 0
    with connect(stack) as sock:
        sock.sendall(
            f"POST /api/conversations HTTP/1.1\r\nHost: {LOOPBACK}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        )
        try:
            while sent < 50 * LIMIT:
                sock.sendall(framed)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed the connection
        try:
            head, _ = read_answer(sock)
        except ConnectionResetError:
            head = b""  # the 413 was sent, but the reset of the unread upload beat it here
    assert LIMIT < sent < 20 * LIMIT, f"{sent:,} bytes sent before the server stopped it"
    assert head == b"" or head.startswith(b"HTTP/1.1 413 "), head


def test_pipelined_and_chunked_requests_go_through(stack: Stack) -> None:
    chunked = (
        f"POST /api/conversations HTTP/1.1\r\nHost: {LOOPBACK}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        "2\r\n{}\r\n0\r\n\r\n"
    ).encode()
    healthz = f"GET /healthz HTTP/1.1\r\nHost: {LOOPBACK}\r\n\r\n".encode()
    with connect(stack) as sock:
        sock.sendall(healthz + chunked + healthz)  # in one write
        statuses = [read_answer(sock)[0].split(b" ")[1] for _ in range(3)]
    # The chunked POST reached the app: it asks for a login (401), not a 413.
    assert statuses == [b"200", b"401", b"200"], statuses


async def test_a_chat_still_streams_over_its_websocket(stack: Stack) -> None:
    stack.script(rules=[{"contains": "LIMITED", "in": "any", "responses": ["Streams on."]}])
    async with Browser(stack.base_url) as browser:
        await browser.login()
        conversation_id = await browser.new_conversation()
        async with Frames(browser.socket(conversation_id), describe=stack.logs) as frames:
            run_id = run_id_of(await browser.send(conversation_id, "LIMITED: hello"))
            done = await frames.wait(
                lambda f: f'id="footer-{run_id}"' in f, timeout=20, what="the run's end"
            )
    assert "Streams on." in done
