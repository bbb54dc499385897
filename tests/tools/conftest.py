"""Real loopback servers for the tool tests: a scriptable HTTP server and MCP processes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

Route = Callable[["Request"], tuple[int, dict[str, str], bytes]]


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class LoopbackServer:
    """An HTTP server on 127.0.0.1 answering from ``routes`` and recording ``requests``."""

    routes: dict[str, Route] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    port: int = 0

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def route(self, path: str, status: int = 200, body: bytes | str = b"", **headers: str) -> None:
        data = body.encode() if isinstance(body, str) else body
        hdrs = {k.replace("_", "-"): v for k, v in headers.items()}
        self.routes[path] = lambda _req: (status, hdrs, data)


def _handler(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            request = Request(self.command, self.path, dict(self.headers.items()), body)
            server.requests.append(request)
            route = server.routes.get(self.path.split("?", 1)[0])
            if route is None:
                status, headers, data = 404, {"Content-Type": "text/plain"}, b"not found"
            else:
                status, headers, data = route(request)
            try:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            except OSError:  # the client went away (size limit, timeout): expected
                self.close_connection = True

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve

    return Handler


@pytest.fixture
def web_server() -> Iterator[LoopbackServer]:
    state = LoopbackServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with code {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on port {port} after {timeout} s")


# The reference time server (PyPI: mcp-server-time, by the MCP maintainers), served over
# streamable HTTP: its own create_server(), run by the SDK's HTTP transport.
TIME_SERVER_HTTP = (
    "import sys; from mcp_server_time.server import create_server; "
    "create_server('UTC').run('streamable-http', host='127.0.0.1', port=int(sys.argv[1]))"
)
TIME_SERVER_STDIO_ARGS = ("-m", "mcp_server_time", "--local-timezone", "UTC")


@pytest.fixture(scope="session")
def mcp_http_url() -> Iterator[str]:
    """The reference time MCP server over streamable HTTP on a free loopback port."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", TIME_SERVER_HTTP, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT
