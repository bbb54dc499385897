"""SSRF guard: a table of bad URLs, redirects into private space, DNS answers, pinning, TLS."""

from __future__ import annotations

import ipaddress
import ssl
import threading
from http.server import ThreadingHTTPServer

import httpx
import pytest

from tests.tlscert import self_signed_certificate
from tests.tools.conftest import _handler
from tools.builtin.web_fetch import web_fetch
from tools.net.guard import (
    NetPolicy,
    UnsafeURLError,
    ip_is_public,
    origin_of,
    parse_ip_literal,
    parse_origin,
    static_resolver,
    system_resolver,
    vet_url,
)
from tools.net.safehttp import FOLLOW, REFUSE, CrossOriginRedirectError, FetchError, safe_request

# Names a test resolver answers; anything else goes to the system resolver (only
# "localhost" is used that way, answered offline from /etc/hosts).
TEST_DNS = {
    "evil.test": ["127.0.0.1"],
    "metadata.test": ["169.254.169.254"],
    "intranet.test": ["10.1.2.3"],
    "v6loop.test": ["::1"],
    "mapped.test": ["::ffff:127.0.0.1"],
    "mixed.test": ["93.184.216.34", "192.168.0.10"],
    "public.test": ["93.184.216.34"],
}


async def _resolver(host: str, port: int) -> list[str]:
    if host.lower().rstrip(".") in TEST_DNS:
        return await static_resolver(TEST_DNS)(host, port)
    return await system_resolver(host, port)


POLICY = NetPolicy(resolver=_resolver)

BAD_URLS = [
    # loopback in every spelling
    "http://127.0.0.1/",
    "http://127.0.0.1:8000/admin",
    "http://2130706433/",  # decimal
    "http://0177.0.0.1/",  # octal
    "http://0x7f000001/",  # hex
    "http://0x7f.0x0.0x0.0x1/",  # dotted hex
    "http://127.1/",  # short form
    "http://017700000001/",  # octal, one part
    "http://0x7f000001./",  # trailing dot
    "http://127\u30020\u30020\u30021/",  # ideographic full stops
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",  # IPv4-mapped
    "http://[::ffff:7f00:1]/",  # IPv4-mapped, hex
    "http://[::127.0.0.1]/",  # IPv4-compatible
    "http://[64:ff9b::7f00:1]/",  # NAT64 well-known prefix
    "http://[2002:7f00:1::]/",  # 6to4 embedding 127.0.0.1
    "http://[2002:a00:1::]/",  # 6to4 embedding 10.0.0.1
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",  # Teredo
    # unspecified, link-local, private, CGNAT, multicast, reserved
    "http://0.0.0.0/",
    "http://0/",
    "http://[::]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
    "http://172.16.0.1/",
    "http://172.31.255.254/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://198.18.0.1/",
    "http://224.0.0.1/",
    "http://239.255.255.250/",
    "http://255.255.255.255/",
    "http://240.0.0.1/",
    "http://[fe80::1]/",
    "http://[fe80::1%25eth0]/",  # with a zone id
    "http://[::ffff:169.254.169.254]/",
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",
    "http://[fec0::1]/",
    "http://[ff02::1]/",
    # schemes
    "file:///etc/passwd",
    "gopher://127.0.0.1:70/_GET",
    "ftp://example.com/file",
    "javascript:alert(1)",
    "dict://127.0.0.1:11211/stat",
    "//example.com/no-scheme",
    # user@host tricks and parser confusion
    "http://user@127.0.0.1/",
    "http://example.com@127.0.0.1/",
    "http://127.0.0.1:80@example.com/",
    "http://user:pass@example.com/",
    "http://example.com\\@127.0.0.1/",
    "http://127.0.0.1 /",
    "http://exa\tmple.com/",
    # DNS names resolving to private space
    "http://localhost/",
    "http://LOCALHOST./",
    "http://evil.test/",
    "http://evil.test.:8080/",
    "http://metadata.test/latest/meta-data/",
    "http://intranet.test/",
    "http://v6loop.test/",
    "http://mapped.test/",
    "http://mixed.test/",  # one public and one private answer
    "http://does-not-exist.invalid/",  # unresolvable
]


@pytest.mark.parametrize("url", BAD_URLS)
async def test_bad_urls_are_refused(url):
    assert len(BAD_URLS) >= 30
    with pytest.raises(UnsafeURLError):
        await vet_url(url, POLICY)


@pytest.mark.parametrize("url", ["http://127.0.0.1/", "http://2130706433/", "http://evil.test/"])
async def test_web_fetch_refuses_before_connecting(url):
    result = await web_fetch(url, policy=POLICY)
    assert result.is_error and "URL refused" in result.content


async def test_public_addresses_pass():
    vetted = await vet_url("https://public.test/path?q=1", POLICY)
    assert str(vetted.ip) == "93.184.216.34" and vetted.port == 443
    assert (await vet_url("http://8.8.8.8/", POLICY)).port == 80
    assert str((await vet_url("http://[2606:4700::1111]/", POLICY)).ip) == "2606:4700::1111"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("10.1", "10.0.0.1"),
        ("[::1]", "::1"),
        ("example.com", None),
        ("face.bad", None),
    ],
)
def test_parse_ip_literal_normalises_legacy_forms(text, expected):
    parsed = parse_ip_literal(text)
    assert (str(parsed) if parsed else None) == expected


def test_ip_is_public_table():
    assert ip_is_public(ipaddress.ip_address("1.1.1.1"))
    assert not ip_is_public(ipaddress.ip_address("100.127.255.255"))
    assert not ip_is_public(ipaddress.ip_address("::ffff:8.8.8.8"))  # mapped: always refused


async def test_allow_hosts_open_specific_hosts_only():
    policy = NetPolicy(allow_hosts=["evil.test", "10.0.0.0/8"], resolver=_resolver)
    assert (await vet_url("http://evil.test/", policy)).allowlisted
    assert (await vet_url("http://intranet.test/", policy)).allowlisted  # 10.1.2.3 in 10/8
    with pytest.raises(UnsafeURLError):
        await vet_url("http://metadata.test/", policy)
    wildcard = NetPolicy(
        allow_hosts=["*.corp.test"], resolver=static_resolver({"a.corp.test": ["10.9.9.9"]})
    )
    assert (await vet_url("http://a.corp.test/", wildcard)).allowlisted


# --- real loopback servers --------------------------------------------------------------


async def test_allowlisted_loopback_server_is_fetched(web_server):
    web_server.route(
        "/page",
        body="<html><head><title>Hello</title><script>alert('x')</script></head>"
        "<body><h1>Welcome</h1><p>Some <b>bold</b> text.</p></body></html>",
        Content_Type="text/html; charset=utf-8",
    )
    policy = NetPolicy(allow_hosts=["127.0.0.1"])
    result = await web_fetch(web_server.url("/page"), policy=policy)
    assert not result.is_error, result.content
    assert "# Welcome" in result.content and "**bold**" in result.content
    assert "alert" not in result.content


@pytest.mark.parametrize(
    "location",
    [
        "http://127.0.0.1:{port}/secret",
        "http://localhost:{port}/secret",
        "http://[::1]:{port}/secret",
        "http://2130706433:{port}/secret",
        "http://10.1.2.3/secret",
        "http://169.254.169.254/latest/meta-data/",
        "http://192.168.0.1/",
        "file:///etc/passwd",
    ],
)
async def test_redirects_into_private_space_are_refused(web_server, location):
    """The server is reachable only by its allowlisted name; every hop is re-checked."""
    web_server.route("/start", status=302, Location=location.format(port=web_server.port))
    web_server.route("/secret", body="top secret", Content_Type="text/plain")
    policy = NetPolicy(
        allow_hosts=["allowed.test"], resolver=static_resolver({"allowed.test": ["127.0.0.1"]})
    )
    result = await web_fetch(web_server.url("/start", host="allowed.test"), policy=policy)
    assert result.is_error and "URL refused" in result.content
    assert "top secret" not in result.content
    assert [r.path for r in web_server.requests] == ["/start"]


async def test_redirects_are_followed_and_capped(web_server):
    web_server.route("/a", status=301, Location="/b")
    web_server.route("/b", status=302, Location="/c")
    web_server.route("/c", body='{"ok": true}', Content_Type="application/json")
    policy = NetPolicy(allow_hosts=["127.0.0.1"])
    result = await web_fetch(web_server.url("/a"), policy=policy)
    assert '"ok": true' in result.content and "/c" in result.content
    for n in range(10):
        web_server.route(f"/loop{n}", status=302, Location=f"/loop{n + 1}")
    looping = await web_fetch(web_server.url("/loop0"), policy=policy)
    assert looping.is_error and "too many redirects" in looping.content


async def test_connection_is_pinned_to_the_vetted_address(web_server):
    """DNS rebinding: the name resolves once; a second, private answer is never used.

    ``rebind.test`` is unknown to the system resolver, so the request can only reach the
    server through the address vetted on the first lookup, with the name in Host.
    """
    web_server.route("/", body="pinned", Content_Type="text/plain")
    answers = iter([["127.0.0.1"], ["10.255.255.1"], ["10.255.255.1"]])
    calls: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return next(answers)

    policy = NetPolicy(allow_hosts=["127.0.0.0/8"], resolver=rebinding)
    response = await safe_request("GET", web_server.url("/", host="rebind.test"), policy=policy)
    assert response.content == b"pinned"
    assert calls == ["rebind.test"]
    assert web_server.requests[0].headers["Host"] == f"rebind.test:{web_server.port}"


async def test_timeout_and_size_limits(web_server):
    import time

    def slow(_request):
        time.sleep(2)
        return 200, {"Content-Type": "text/plain"}, b"late"

    web_server.routes["/slow"] = slow
    web_server.route("/big", body=b"x" * 50_000, Content_Type="text/plain")
    policy = NetPolicy(allow_hosts=["127.0.0.1"])
    with pytest.raises(FetchError, match="timed out"):
        await safe_request("GET", web_server.url("/slow"), policy=policy, timeout=0.5)
    big = await safe_request("GET", web_server.url("/big"), policy=policy, max_bytes=1000)
    assert big.truncated and len(big.content) == 1000


# --- TLS: SNI and certificate checks still work with the pinned address ------------------


@pytest.fixture
def tls_server(tmp_path, web_server):
    cert_pem, key_pem = self_signed_certificate("secure.test")
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    seen_sni: list[str | None] = []
    server_ctx.sni_callback = lambda sock, name, ctx: seen_sni.append(name)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(web_server))
    httpd.socket = server_ctx.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    client_ctx = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
    try:
        yield httpd.server_address[1], client_ctx, seen_sni
    finally:
        httpd.shutdown()
        httpd.server_close()


async def test_https_sends_sni_and_verifies_the_name(web_server, tls_server):
    port, client_ctx, seen_sni = tls_server
    web_server.route("/", body="over tls", Content_Type="text/plain")
    resolver = static_resolver({"secure.test": ["127.0.0.1"], "wrong.test": ["127.0.0.1"]})
    policy = NetPolicy(allow_hosts=["127.0.0.1/32"], resolver=resolver)
    ok = await safe_request("GET", f"https://secure.test:{port}/", policy=policy, verify=client_ctx)
    assert ok.content == b"over tls" and seen_sni == ["secure.test"]
    with pytest.raises(FetchError):
        await safe_request("GET", f"https://wrong.test:{port}/", policy=policy, verify=client_ctx)


# --- origins: allow-listing and redirects ------------------------------------------------


async def test_allow_origins_open_a_scheme_host_and_port_only():
    resolver = static_resolver({"api.corp.test": ["10.0.0.5"]})
    policy = NetPolicy(
        allow_origins=["http://api.corp.test:8080", "https://10.0.0.6"], resolver=resolver
    )
    assert (await vet_url("http://API.corp.test.:8080/v1?x=1", policy)).allowlisted
    assert (await vet_url("https://10.0.0.6:443/", policy)).allowlisted
    for url in (
        "http://api.corp.test/",  # port 80
        "http://api.corp.test:5432/",  # the database next to the API
        "https://api.corp.test:8080/",  # another scheme
        "http://10.0.0.6/",
        "http://10.0.0.6:8443/",
    ):
        with pytest.raises(UnsafeURLError):
            await vet_url(url, policy)


@pytest.mark.parametrize(
    "text", ["10.0.0.5", "http://a.test/path", "ftp://a.test", "http://u@a.test", "http://a.test?x"]
)
def test_an_allow_origins_entry_must_be_an_origin(text):
    with pytest.raises(ValueError, match="invalid origin"):
        NetPolicy(allow_origins=[text])


async def test_cross_origin_redirects_drop_the_callers_headers_by_default(web_server):
    """``a.test`` and ``b.test`` are one server: only the host name differs."""
    web_server.route("/go", status=302, Location=web_server.url("/next", host="b.test"))
    web_server.route("/next", body="done", Content_Type="text/plain")
    resolver = static_resolver({"a.test": ["127.0.0.1"], "b.test": ["127.0.0.1"]})
    policy = NetPolicy(allow_hosts=["127.0.0.1/32"], resolver=resolver)
    start = web_server.url("/go", host="a.test")
    headers = {"Authorization": "Bearer s3cret"}
    dropped = await safe_request("GET", start, policy=policy, headers=headers)
    assert dropped.content == b"done"
    assert "Authorization" in web_server.requests[0].headers
    assert "Authorization" not in web_server.requests[1].headers
    kept = await safe_request("GET", start, policy=policy, headers=headers, cross_origin=FOLLOW)
    assert kept.content == b"done" and "Authorization" in web_server.requests[3].headers
    with pytest.raises(CrossOriginRedirectError, match=r"another origin \(http://b\.test:"):
        await safe_request("GET", start, policy=policy, headers=headers, cross_origin=REFUSE)
    assert len(web_server.requests) == 5  # the refused redirect was not followed


def test_origin_of_makes_default_ports_explicit():
    assert origin_of(httpx.URL("https://A.test./x")) == ("https", "a.test", 443)
    assert origin_of(httpx.URL("http://a.test:443/")) == ("http", "a.test", 443)
    assert parse_origin("http://[::1]:8000") == ("http", "::1", 8000)
