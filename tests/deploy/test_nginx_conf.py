"""deploy/nginx.conf: rendered, checked by ``nginx -t``, and served by a real nginx in
front of a recording stand-in upstream (the full chain with the app's servers:
tests/integration/test_nginx.py)."""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from tests.deploy.nginx import (
    PLACEHOLDERS,
    TEMPLATE,
    collect_static,
    configured_nginx,
    raw_exchange,
    render,
)
from tests.integration.stack import LOOPBACK, free_port
from tests.tlscert import self_signed_certificate

# Tests that start nginx (Debian's package, `make system-deps`) leave `make test-fast`.
needs_nginx = pytest.mark.integration
MULTIPART_SLACK = 64 * 1024  # an import's file plus its multipart framing and CSRF field


def test_the_template_has_exactly_the_documented_placeholders() -> None:
    found = set(re.findall(r"\$\{([A-Za-z0-9_]+)\}", TEMPLATE.read_text()))
    assert found == set(PLACEHOLDERS)
    rendered = render({"AGENTSITE_NGINX_STATIC_ROOT": "/srv/static"})
    assert "${" not in rendered
    # nginx's own variables are left alone, the defaults fit the plain-host layout.
    for kept in ("$http_host", "$proxy_add_x_forwarded_for", "$scheme", "$http_upgrade"):
        assert kept in rendered
    assert "server 127.0.0.1:8001; server 127.0.0.1:8002;" in rendered
    assert "alias /srv/static/;" in rendered


def body_limit_bytes(value: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kKmM]?)", value).groups()  # type: ignore[union-attr]
    return int(number) * {"": 1, "k": 1024, "m": 1024 * 1024}[unit.lower()]


def test_the_body_limit_matches_the_apps() -> None:
    """nginx lets through every body the app answers itself (its own 413 with the limit in
    words), and not much more: the default 1300k is the app's limit plus the slack."""
    app_limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE  # the API's JSON limit is the same
    assert settings.AGENTSITE_MESSAGE_MAX_CHARS == 100_000, "the defaults are compared here"
    wanted = math.ceil((app_limit + MULTIPART_SLACK) / 1024)
    rendered = render({})
    [value, files_value] = re.findall(r"client_max_body_size (\S+);", rendered)
    assert body_limit_bytes(value) == wanted * 1024, (value, wanted)
    assert files_value == "21m"  # the one location that takes more: the next test


def test_file_uploads_alone_may_be_as_large_as_the_apps_file_limit() -> None:
    """POST /api/files takes a file up to AGENTSITE_FILE_MAX_BYTES plus the framing the app
    allows (files/uploads.py): exactly that, so the app's 413 answers a file a little too
    large; the location still proxies to the app with the server's headers."""
    from files.uploads import MULTIPART_SLACK_BYTES

    rendered = render({})
    [block] = re.findall(r"location = /api/files \{(.*?)\n    \}", rendered, re.S)
    [value] = re.findall(r"client_max_body_size (\S+);", block)
    assert settings.AGENTSITE_FILE_MAX_BYTES == 20 * 1024 * 1024, "the defaults are compared"
    assert body_limit_bytes(value) == settings.AGENTSITE_FILE_MAX_BYTES + MULTIPART_SLACK_BYTES
    assert "proxy_pass http://agentsite;" in block
    assert "proxy_set_header" not in block  # so it inherits the server's (Host, X-Forwarded-*)
    # Its own error pages replace the server's: the outage answer is kept, and nginx's 413
    # names this location's limit.
    assert "error_page 502 504 =503 @unavailable;" in block
    assert "error_page 413 @file_too_large;" in block
    assert "the limit for file uploads is 21m" in rendered


@needs_nginx
def test_nginx_accepts_the_rendered_configuration(web_server) -> None:
    with configured_nginx([f"{LOOPBACK}:{web_server.port}"], static=False) as nginx:
        checked = nginx.test_config()
    assert checked.returncode == 0, checked.stderr
    assert "syntax is ok" in checked.stderr and "test is successful" in checked.stderr


@needs_nginx
def test_the_tls_example_serves_https_and_redirects_http(web_server) -> None:
    web_server.route("/hello", body="from upstream", Content_Type="text/plain")
    cert, key = self_signed_certificate("127.0.0.1")
    example = (TEMPLATE.parent / "nginx" / "tls.conf.example").read_text()
    port = free_port()
    with configured_nginx([f"{LOOPBACK}:{web_server.port}"], static=False) as nginx:
        (nginx.snippets / "fullchain.pem").write_bytes(cert)
        (nginx.snippets / "privkey.pem").write_bytes(key)
        snippet = example.replace("listen 443 ssl", f"listen {LOOPBACK}:{port} ssl")
        snippet = snippet.replace("/etc/nginx/agentsite.d", str(nginx.snippets))
        (nginx.snippets / "tls.conf").write_text(snippet)
        for path in nginx.snippets.iterdir():
            if nginx.uid is not None:
                os.chown(path, nginx.uid, nginx.gid)
        nginx.start()  # its health check still answers over plain HTTP
        plain = httpx.get(f"{nginx.url}/hello?x=1", trust_env=False)
        secure = httpx.get(f"https://{LOOPBACK}:{port}/hello", verify=False, trust_env=False)
    assert plain.status_code == 301
    assert plain.headers["location"] == "https://127.0.0.1/hello?x=1"
    assert secure.status_code == 200 and secure.text == "from upstream"
    assert secure.headers["strict-transport-security"] == "max-age=31536000"
    [request] = web_server.requests
    assert request.headers["X-Forwarded-Proto"] == "https"


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> Path:
    """deploy/collect-static's tree, made once for the module."""
    tree = tmp_path_factory.mktemp("collected") / "static"
    collect_static(tree)
    return tree


@pytest.fixture
def proxy(web_server, collected):
    """nginx with the collected static files in front of the recording stand-in."""
    web_server.route("/hello", body="from upstream", Content_Type="text/plain")
    with configured_nginx([f"{LOOPBACK}:{web_server.port}"], static=collected) as nginx:
        nginx.start()
        yield nginx


@needs_nginx
@pytest.mark.parametrize(
    ("length", "status"),
    [
        ("1000000000000000", 413),  # a petabyte, declared: over client_max_body_size
        ("99999999999999999999", 400),  # beyond 64 bits: nginx's "invalid Content-Length"
    ],
)
def test_a_huge_declared_body_never_reaches_the_app(proxy, web_server, length, status) -> None:
    head = (
        f"POST /api/conversations HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
    started = time.monotonic()
    answer = raw_exchange(proxy.port, head)
    assert answer.startswith(f"HTTP/1.1 {status} ".encode()), answer[:300]
    assert time.monotonic() - started < 5  # at once, without waiting for a body
    if status == 413:
        assert b'"error": "The request body is too large (the limit is 1300k)."' in answer
    assert web_server.requests == []
    # And the proxy still serves.
    assert httpx.get(f"{proxy.url}/hello", trust_env=False).text == "from upstream"


@needs_nginx
def test_a_body_within_the_limit_is_passed_on(proxy, web_server) -> None:
    body = b"x" * (body_limit_bytes("1300k") - 1)
    web_server.route("/api/import", status=413, body="the app's own answer")
    response = httpx.post(f"{proxy.url}/api/import", content=body, trust_env=False, timeout=30)
    assert (response.status_code, response.text) == (413, "the app's own answer")
    assert len(web_server.requests[-1].body) == len(body)
    over = httpx.post(f"{proxy.url}/api/import", content=body + b"xx", trust_env=False)
    assert over.status_code == 413 and over.json()["error"].startswith("The request body")
    assert len(web_server.requests) == 1


@needs_nginx
def test_a_file_upload_may_be_larger_than_other_bodies(proxy, web_server) -> None:
    web_server.route("/api/files", status=201, body="stored")
    body = b"x" * body_limit_bytes("21m")
    response = httpx.post(f"{proxy.url}/api/files", content=body, trust_env=False, timeout=60)
    assert (response.status_code, response.text) == (201, "stored")
    assert len(web_server.requests[-1].body) == len(body)
    seen = {k.lower(): v for k, v in web_server.requests[-1].headers.items()}
    assert seen["host"] == f"127.0.0.1:{proxy.port}" and "x-forwarded-for" in seen
    over = httpx.post(f"{proxy.url}/api/files", content=body + b"x", trust_env=False, timeout=60)
    assert over.status_code == 413
    assert over.json()["error"].endswith("(the limit for file uploads is 21m).")
    # Only the upload itself: any other path keeps the small limit.
    other = b"x" * (body_limit_bytes("1300k") + 1)
    elsewhere = httpx.post(f"{proxy.url}/api/files/1", content=other, trust_env=False)
    assert elsewhere.status_code == 413 and "1300k" in elsewhere.json()["error"]
    assert len(web_server.requests) == 1


@needs_nginx
def test_requests_carry_the_forwarding_headers(proxy, web_server) -> None:
    response = httpx.get(
        f"{proxy.url}/hello",
        headers={
            "X-Forwarded-For": "203.0.113.9",  # what a client claims comes first
            "X-Forwarded-Proto": "https",  # and is replaced: nginx saw plain HTTP
            "X-Request-ID": "chosen-by-client",
        },
        trust_env=False,
    )
    assert response.status_code == 200
    seen = {k.lower(): v for k, v in web_server.requests[-1].headers.items()}
    assert seen["host"] == f"127.0.0.1:{proxy.port}"  # with the port: the origin checks
    assert seen["x-forwarded-host"] == f"127.0.0.1:{proxy.port}"
    assert seen["x-forwarded-proto"] == "http"
    assert seen["x-forwarded-for"] == "203.0.113.9, 127.0.0.1"  # the last hop is nginx's
    assert re.fullmatch(r"[0-9a-f]{32}", seen["x-request-id"])
    assert "upgrade" not in seen.get("connection", "").lower()


@needs_nginx
def test_static_files_are_served_compressed_and_revalidated(proxy, web_server) -> None:
    url = f"{proxy.url}/static/vendor/mermaid/mermaid.min.js"
    response = httpx.get(url, headers={"Accept-Encoding": "gzip"}, trust_env=False)
    assert response.status_code == 200
    assert response.headers["content-encoding"] == "gzip"  # the precompressed copy
    assert int(response.headers["content-length"]) < 2_000_000  # of 5.5 MB
    assert response.headers["cache-control"] == "public, no-cache"
    assert response.headers["vary"] == "Accept-Encoding"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "javascript" in response.headers["content-type"]
    assert len(response.content) > 5_000_000  # httpx decompressed it: the whole bundle
    again = httpx.get(
        url,
        headers={"Accept-Encoding": "gzip", "If-None-Match": response.headers["etag"]},
        trust_env=False,
    )
    assert again.status_code == 304 and again.content == b""  # fetched once
    plain = httpx.get(url, headers={"Accept-Encoding": "identity"}, trust_env=False)
    assert "content-encoding" not in plain.headers
    assert int(plain.headers["content-length"]) > 5_000_000
    assert web_server.requests == []  # none of it reached the app


@needs_nginx
def test_hashed_static_names_are_cached_for_a_year(proxy) -> None:
    hashed = proxy.static_root / "js" / "chat.0123456789ab.js"
    hashed.write_text("// a ManifestStaticFilesStorage name\n")
    response = httpx.get(f"{proxy.url}/static/js/chat.0123456789ab.js", trust_env=False)
    assert response.status_code == 200
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert response.headers["x-content-type-options"] == "nosniff"
    missing = httpx.get(f"{proxy.url}/static/js/nothing-here.js", trust_env=False)
    assert missing.status_code == 404


@needs_nginx
def test_the_admin_static_files_are_collected(proxy) -> None:
    response = httpx.get(f"{proxy.url}/static/admin/css/base.css", trust_env=False)
    assert response.status_code == 200 and "text/css" in response.headers["content-type"]


@needs_nginx
def test_no_upstream_answering_is_a_503_with_retry_after() -> None:
    with configured_nginx([f"{LOOPBACK}:{free_port()}"], static=False) as nginx:
        nginx.start()
        response = httpx.get(f"{nginx.url}/c/1/", trust_env=False, timeout=20)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert "briefly unavailable" in response.json()["error"]


@needs_nginx
def test_the_proxy_answers_its_own_health_check(proxy) -> None:
    response = httpx.get(f"{proxy.url}/_nginx/alive", trust_env=False)
    assert (response.status_code, response.text) == (200, "alive\n")
