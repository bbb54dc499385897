"""Structured logs (issue 44): ``AGENTSITE_LOG_FORMAT=json`` writes one JSON object a line
with the request, user, conversation and run ids; the request id is the trusted proxy's
``X-Request-ID`` or a fresh one, echoed in the response. Checked in process (the context,
the filter, the middleware on both of Django's paths) and on a real ``agentsite-server``."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.http import HttpResponse
from django.test import RequestFactory
from django.utils.functional import SimpleLazyObject

from core import health, logcontext
from core.jsonlog import JsonFormatter
from core.logcontext import ContextFilter, RequestContextMiddleware
from tests.tools.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
FRESH_ID = re.compile(r"[0-9a-f]{32}")
TEXT_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|ERROR) [\w.]+: .*")


@pytest.fixture
def json_log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger writing what JSON mode writes, to a string."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("tests.jsonlog")
    logger.addHandler(handler)
    logger.propagate = False
    yield logger, out
    logger.removeHandler(handler)
    logger.propagate = True


def lines(out: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_json_line_carries_the_ids_known_and_only_those(json_log):
    logger, out = json_log
    with logcontext.bound(request_id="abc", run_id=7, conversation_id=3):
        logger.warning("run %s: two\nlines, é\u2028", 7)
        with logcontext.bound(run_id=8):
            logger.info("inner")
        logger.info("given", extra={"run_id": 9})  # what the call says wins
    logger.info("outside")
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("failed")

    first, inner, given, outside, failed = lines(out)  # one object a line
    assert first["message"] == "run 7: two\nlines, é\u2028"
    assert first["level"] == "WARNING" and first["logger"] == "tests.jsonlog"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"])
    assert (first["request_id"], first["conversation_id"], first["run_id"]) == ("abc", 3, 7)
    assert "user_id" not in first and "exception" not in first
    assert inner["run_id"] == 8 and given["run_id"] == 9
    assert set(outside) == {"time", "level", "logger", "message"}
    assert "ValueError: boom" in failed["exception"] and "Traceback" in failed["exception"]


def test_the_context_is_set_and_undone_around_a_sync_request(json_log, rf):
    logger, out = json_log
    user = get_user_model()(pk=42, username="alice")
    seen = {}

    def view(request):
        request.user = user  # as authentication (or an API token) sets it
        logger.info("in the view")
        seen.update(logcontext.current())
        return HttpResponse("ok")

    request = rf.get("/c/5/", HTTP_X_REQUEST_ID="from-client")
    request.resolver_match = type("Match", (), {"kwargs": {"conversation_id": 5}})()
    response = RequestContextMiddleware(view)(request)

    [line] = lines(out)
    assert FRESH_ID.fullmatch(line["request_id"])  # no trusted proxy: the header is ignored
    assert (line["user_id"], line["conversation_id"]) == (42, 5)
    assert response["X-Request-ID"] == line["request_id"] == request.request_id
    assert seen == {"request_id": line["request_id"], "user_id": 42, "conversation_id": 5}
    assert logcontext.current() == {}  # undone after the request


@pytest.mark.django_db
def test_a_user_not_loaded_is_not_looked_up_for_a_log_line(json_log, rf, django_assert_num_queries):
    logger, out = json_log

    def view(request):
        request.user = SimpleLazyObject(lambda: get_user_model().objects.get(pk=1))
        with django_assert_num_queries(0):
            logger.info("lazy")
        return HttpResponse("ok")

    RequestContextMiddleware(view)(rf.get("/"))
    [line] = lines(out)
    assert "user_id" not in line and FRESH_ID.fullmatch(line["request_id"])


async def test_the_context_is_set_around_an_async_request(json_log, settings):
    logger, out = json_log
    settings.AGENTSITE_TRUSTED_PROXY_HOPS = 1

    async def view(request):
        logger.info("streaming")
        return HttpResponse("ok")

    middleware = RequestContextMiddleware(view)
    request = RequestFactory().get("/", HTTP_X_REQUEST_ID="nginx-1", HTTP_X_FORWARDED_FOR="1.2.3.4")
    response = await middleware(request)
    [line] = lines(out)
    assert line["request_id"] == response["X-Request-ID"] == "nginx-1"
    assert logcontext.current() == {}


@pytest.mark.parametrize(
    ("hops", "headers", "trusted"),
    [
        (1, {"HTTP_X_FORWARDED_FOR": "203.0.113.9"}, True),
        (2, {"HTTP_X_FORWARDED_FOR": "203.0.113.9, 10.0.0.2"}, True),
        (0, {"HTTP_X_FORWARDED_FOR": "203.0.113.9"}, False),  # no proxies trusted
        (1, {}, False),  # not through the proxy
    ],
)
def test_the_request_id_is_the_trusted_proxys(rf, settings, hops, headers, trusted):
    settings.AGENTSITE_TRUSTED_PROXY_HOPS = hops
    request = rf.get("/", HTTP_X_REQUEST_ID="0f9e8d7c6b5a", **headers)
    request_id = logcontext.request_id_for(request)
    assert (request_id == "0f9e8d7c6b5a") is trusted
    if not trusted:
        assert FRESH_ID.fullmatch(request_id)


@pytest.mark.parametrize("sent", ["x" * 129, "two words", "a\tb", "é"])
def test_an_unusable_request_id_is_replaced(rf, settings, sent):
    settings.AGENTSITE_TRUSTED_PROXY_HOPS = 1
    request = rf.get("/", HTTP_X_REQUEST_ID=sent, HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert FRESH_ID.fullmatch(logcontext.request_id_for(request))


@pytest.mark.django_db
def test_a_line_logged_in_a_view_carries_the_request_id(client, settings, caplog, monkeypatch):
    """Through the whole middleware stack: /readyz logs a warning when not ready."""
    settings.AGENTSITE_TRUSTED_PROXY_HOPS = 1

    def broken() -> str:
        raise RuntimeError("down")

    monkeypatch.setattr(health, "CHECKS", (("database", broken),))
    caplog.handler.addFilter(ContextFilter())
    with caplog.at_level(logging.WARNING):
        response = client.get(
            "/readyz", HTTP_X_REQUEST_ID="req-123", HTTP_X_FORWARDED_FOR="203.0.113.9"
        )
    assert response.status_code == 503 and response["X-Request-ID"] == "req-123"
    [record] = [r for r in caplog.records if r.name == "core.health"]
    assert record.request_id == "req-123"


# ------------------------------------------------------------------- a real server


@dataclass
class Server:
    url: str
    stdout: Path
    stderr: Path

    def get(self, path: str, **headers: str) -> tuple[int, Message]:
        request = urllib.request.Request(self.url + path, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.headers
        except urllib.error.HTTPError as error:
            return error.code, error.headers

    def stderr_line(self, needle: str) -> str:
        """The stderr line containing ``needle`` (written just after the response)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = [line for line in self.stderr.read_text().splitlines() if needle in line]
            if found:
                return found[-1]
            time.sleep(0.05)
        raise AssertionError(f"no line with {needle!r} in:\n{self.stderr.read_text()}")


@pytest.fixture(scope="module")
def instance(tmp_path_factory) -> dict[str, str]:
    """A migrated embedded-mode instance in a temporary var dir."""
    var = tmp_path_factory.mktemp("logs-var")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentsite.settings"}
    for name in ("REDIS_URL", "DATABASE_URL", "SECRET_KEY", "LOG_LEVEL"):
        env.pop(name, None)
    env.update(AGENTSITE_VAR_DIR=str(var), ENCRYPTION_KEYS="", PYTHONUNBUFFERED="1")
    for command in (["prepare_instance"], ["migrate", "--noinput", "-v0"]):
        done = subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    return env


@contextlib.contextmanager
def serving(env: dict[str, str], tmp_path: Path, **more: str) -> Iterator[Server]:
    port = free_port()
    stdout, stderr = tmp_path / "stdout.log", tmp_path / "stderr.log"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentsite.server", "-b", "127.0.0.1", "-p", str(port),
             "agentsite.asgi:application"],
            cwd=REPO, env={**env, **more}, stdout=out, stderr=err,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, stderr.read_text()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.05)
        yield Server(f"http://127.0.0.1:{port}", stdout, stderr)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_json_logs_of_a_real_server_carry_the_proxys_request_id(instance, tmp_path):
    with serving(
        instance, tmp_path, AGENTSITE_LOG_FORMAT="json", AGENTSITE_TRUSTED_PROXY_HOPS="1"
    ) as server:
        # As nginx sends it: its $request_id, the client's address appended.
        status, headers = server.get(
            "/api/no-such-thing",
            **{"X-Request-ID": "5f1c0ffee5f1c0ffee", "X-Forwarded-For": "203.0.113.9"},
        )
        assert status == 404 and headers["X-Request-ID"] == "5f1c0ffee5f1c0ffee"
        line = json.loads(server.stderr_line("/api/no-such-thing"))
        assert line["request_id"] == "5f1c0ffee5f1c0ffee"
        assert line["level"] == "WARNING" and line["logger"] == "django.request"
        assert line["message"] == "Not Found: /api/no-such-thing"
        assert line["time"].endswith("Z")

        # Straight to the server, not through the proxy: the header is not believed.
        status, headers = server.get("/api/not-proxied", **{"X-Request-ID": "forged"})
        line = json.loads(server.stderr_line("/api/not-proxied"))
        assert FRESH_ID.fullmatch(headers["X-Request-ID"])
        assert line["request_id"] == headers["X-Request-ID"]

        status, headers = server.get("/healthz")
        assert status == 200 and FRESH_ID.fullmatch(headers["X-Request-ID"])
        server.stderr_line("/api/not-proxied")  # everything written so far is JSON
        for text in server.stderr.read_text().splitlines():
            assert json.loads(text)["level"], text
        assert "healthz" not in server.stderr.read_text()


def test_text_logs_are_as_before_and_ignore_the_header_without_proxies(instance, tmp_path):
    with serving(instance, tmp_path, AGENTSITE_LOG_FORMAT="text") as server:
        status, headers = server.get(
            "/api/no-such-thing",
            **{"X-Request-ID": "5f1c0ffee5f1c0ffee", "X-Forwarded-For": "203.0.113.9"},
        )
        assert status == 404 and FRESH_ID.fullmatch(headers["X-Request-ID"])
        line = server.stderr_line("/api/no-such-thing")
        assert TEXT_LINE.fullmatch(line), line
        assert line.endswith(" WARNING django.request: Not Found: /api/no-such-thing")


@pytest.mark.django_db
def test_django_s_line_after_the_response_carries_the_request_and_user(client, caplog):
    """``django.request``'s "Not Found" is written once the middleware has returned: its
    ids come from the request the record carries."""
    user = get_user_model().objects.create_user("bob", password="a-long-password-1")
    client.force_login(user)
    caplog.handler.addFilter(ContextFilter())
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get("/api/no-such-thing")
    [record] = [r for r in caplog.records if r.name == "django.request"]
    assert record.getMessage() == "Not Found: /api/no-such-thing"
    assert (record.request_id, record.user_id) == (response["X-Request-ID"], user.pk)
