from __future__ import annotations

import gzip

from tools.builtin.web_fetch import build, html_to_markdown, web_fetch
from tools.net.guard import NetPolicy
from tools.registry import ToolContext

LOCAL = NetPolicy(allow_hosts=["127.0.0.1"])


def test_html_to_markdown_keeps_content_drops_chrome():
    title, text = html_to_markdown(
        "<html><head><title>T</title><style>p{}</style></head><body>"
        "<nav><a href='/'>Home</a></nav><main><h2>Section</h2><ul><li>one</li><li>two</li></ul>"
        "<a href='https://example.com/x'>link</a><pre>code()</pre></main>"
        "<footer>(c) footer</footer><script>steal()</script></body></html>"
    )
    assert title == "T"
    assert "## Section" in text and "- one" in text and "[link](https://example.com/x)" in text
    assert "code()" in text
    for dropped in ("Home", "footer", "steal", "p{}"):
        assert dropped not in text


async def test_content_types(web_server):
    web_server.route("/json", body='{"b": [1, 2], "a": "é"}', Content_Type="application/json")
    web_server.route("/text", body="plain words", Content_Type="text/plain; charset=utf-8")
    web_server.route(
        "/latin", body="caf\xe9".encode("latin-1"), Content_Type="text/plain; charset=latin-1"
    )
    web_server.route("/png", body=b"\x89PNG\r\n\x1a\n", Content_Type="image/png")
    web_server.route("/pdf", body=b"%PDF-1.4", Content_Type="application/pdf")

    json_result = await web_fetch(web_server.url("/json"), policy=LOCAL)
    assert '"b": [\n    1,' in json_result.content and '"a": "é"' in json_result.content
    assert "plain words" in (await web_fetch(web_server.url("/text"), policy=LOCAL)).content
    assert "café" in (await web_fetch(web_server.url("/latin"), policy=LOCAL)).content
    for path, kind in (("/png", "image/png"), ("/pdf", "application/pdf")):
        refused = await web_fetch(web_server.url(path), policy=LOCAL)
        assert refused.is_error and f"type '{kind}'" in refused.content


async def test_http_errors_and_unreachable(web_server):
    missing = await web_fetch(web_server.url("/missing"), policy=LOCAL)
    assert missing.is_error and "HTTP 404" in missing.content
    closed = await web_fetch("http://127.0.0.1:9/", policy=LOCAL, timeout=2)
    assert closed.is_error and "could not fetch" in closed.content


async def test_output_is_cut_with_a_marker(web_server):
    web_server.route("/long", body="word " * 10_000, Content_Type="text/plain")
    result = await web_fetch(web_server.url("/long"), policy=LOCAL, max_chars=1000)
    assert "[... truncated:" in result.content and len(result.content) < 1200


async def test_read_size_limit_counts_decompressed_bytes(web_server):
    bomb = gzip.compress(b"A" * 5_000_000)  # ~5 KB on the wire, 5 MB inflated
    web_server.route("/bomb", body=bomb, Content_Type="text/plain", Content_Encoding="gzip")
    result = await web_fetch(web_server.url("/bomb"), policy=LOCAL, max_bytes=100_000)
    assert "only the first 100,000 bytes" in result.content


async def test_tool_from_config(web_server):
    web_server.route("/", body="<h1>Hi</h1>", Content_Type="text/html")
    (tool,) = build({"allow_hosts": ["127.0.0.1"], "max_chars": 5000}, ToolContext())
    result = await tool.invoke({"url": web_server.url("/")})
    assert "# Hi" in result.content
    (guarded,) = build({}, ToolContext())
    refused = await guarded.invoke({"url": web_server.url("/")})
    assert refused.is_error and "not a public internet address" in refused.content
