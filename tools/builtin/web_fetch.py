"""``web_fetch``: GET a public URL and return readable text.

HTML becomes markdown (BeautifulSoup drops scripts, styles and page chrome, markdownify
converts the rest); text is returned as is, JSON pretty-printed, anything else refused
with a message. Every hop goes through the SSRF guard (:mod:`tools.net.guard`); the
admin's ``allow_hosts`` opens specific internal hosts.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bs4 import BeautifulSoup
from markdownify import MarkdownConverter

from engine import Tool, ToolResult
from tools.net.guard import NetPolicy, UnsafeURLError
from tools.net.reachability import public_network_problem
from tools.net.safehttp import (
    DEFAULT_MAX_BYTES,
    FOLLOW,
    FetchedResponse,
    FetchError,
    safe_request,
)
from tools.registry import ToolContext, ToolSpec, register

__all__ = ["html_to_markdown", "response_to_text", "truncate", "web_fetch"]

DEFAULT_MAX_CHARS = 20_000
DEFAULT_TIMEOUT = 20.0
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
JSON_TYPES = frozenset({"application/json", "application/ld+json", "text/json"})
TEXT_LIKE = frozenset({"application/xml", "application/javascript", "application/x-yaml"})
_DROP_TAGS = [
    "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object",
    "embed", "form", "button", "input", "select", "textarea", "nav", "footer",
]  # fmt: skip
ACCEPT = "text/html,application/xhtml+xml,text/plain,application/json;q=0.9,*/*;q=0.5"
_BLANK_LINES = re.compile(r"\n{3,}")


def truncate(text: str, limit: int) -> str:
    """Cut to ``limit`` characters with a marker saying how much was dropped."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n\n[... truncated: {len(text) - limit:,} more characters]"


def html_to_markdown(html: str | bytes, charset: str | None = None) -> tuple[str, str]:
    """(title, markdown) of an HTML page, without scripts, styles, forms and navigation."""
    soup = BeautifulSoup(
        html, "html.parser", from_encoding=charset if isinstance(html, bytes) else None
    )
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(_DROP_TAGS):
        tag.decompose()
    if soup.head:
        soup.head.decompose()
    main = soup.find("main") or soup.find("article") or soup.body or soup
    text = MarkdownConverter(heading_style="ATX", bullets="-", strip=["img"]).convert_soup(main)
    return title, _BLANK_LINES.sub("\n\n", text).strip()


def response_to_text(response: FetchedResponse) -> ToolResult:
    """Readable text for the content types we understand; a refusal for the rest."""
    kind = response.content_type
    if kind in HTML_TYPES or (
        not kind and response.content.lstrip()[:15].lower().startswith(b"<!doctype html")
    ):
        title, body = html_to_markdown(response.content, response.charset)
        return ToolResult(f"# {title}\n\n{body}" if title else body, "markdown")
    if kind in JSON_TYPES or kind.endswith("+json"):
        text = response.text()
        try:
            return ToolResult(json.dumps(json.loads(text), indent=2, ensure_ascii=False), "json")
        except ValueError:
            return ToolResult(text)
    if kind.startswith("text/") or kind in TEXT_LIKE or kind.endswith("+xml"):
        return ToolResult(response.text())
    shown = kind or "unknown"
    return ToolResult(
        f"Error: cannot read content of type '{shown}' from {response.url}: only HTML, text "
        "and JSON are supported.",
        is_error=True,
    )


async def web_fetch(
    url: str,
    *,
    policy: NetPolicy,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_chars: int = DEFAULT_MAX_CHARS,
    timeout: float = DEFAULT_TIMEOUT,
) -> ToolResult:
    try:
        response = await safe_request(
            "GET", url, policy=policy, max_bytes=max_bytes, timeout=timeout,
            headers={"Accept": ACCEPT}, cross_origin=FOLLOW,  # nothing private to drop
        )  # fmt: skip
    except UnsafeURLError as exc:
        return ToolResult(f"Error: URL refused: {exc}", is_error=True)
    except FetchError as exc:
        return ToolResult(f"Error: {exc}", is_error=True)
    if response.status_code >= 400:
        preview = truncate(response.text().strip(), 500)
        return ToolResult(
            f"Error: HTTP {response.status_code} from {response.url}\n{preview}", is_error=True
        )
    result = response_to_text(response)
    if result.is_error:
        return result
    header = f"URL: {response.url}\n"
    if response.truncated:
        header += f"(only the first {max_bytes:,} bytes of the page were read)\n"
    return ToolResult(header + "\n" + truncate(result.content, max_chars), "text")


def unavailable(config: dict[str, Any]) -> str:
    """Without internet the tool only collects errors, unless the admin opened internal
    hosts for it (``allow_hosts``)."""
    if config.get("allow_hosts"):
        return ""
    return public_network_problem()


def build(config: dict[str, Any], context: ToolContext) -> list[Tool]:
    policy = NetPolicy(allow_hosts=config.get("allow_hosts") or ())
    max_bytes = int(config.get("max_bytes") or DEFAULT_MAX_BYTES)
    max_chars = int(config.get("max_chars") or DEFAULT_MAX_CHARS)
    timeout = float(config.get("timeout") or DEFAULT_TIMEOUT)

    async def run(url: str) -> ToolResult:
        return await web_fetch(
            url, policy=policy, max_bytes=max_bytes, max_chars=max_chars, timeout=timeout
        )

    return [
        Tool(
            name="web_fetch",
            description=(
                "Fetch a web page (http/https) and return its readable text as markdown; "
                "JSON is pretty-printed. Long pages are cut. Use after web_search to read a "
                "result."
            ),
            parameters={
                "type": "object",
                "properties": {"url": {"type": "string", "description": "Absolute http(s) URL"}},
                "required": ["url"],
            },
            func=run,
            timeout=timeout + 5,
        )
    ]


SPEC = register(
    ToolSpec(
        name="web_fetch",
        description="Fetch a URL and return readable text (SSRF-safe).",
        build=build,
        unavailable=unavailable,
        config_schema={
            "type": "object",
            "properties": {
                "allow_hosts": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Internal hosts (names, IPs or CIDR networks) that may be "
                    "fetched despite the private-address guard.",
                },
                "max_bytes": {"type": "integer", "minimum": 1024, "default": DEFAULT_MAX_BYTES},
                "max_chars": {"type": "integer", "minimum": 500, "default": DEFAULT_MAX_CHARS},
                "timeout": {"type": "number", "minimum": 1, "default": DEFAULT_TIMEOUT},
            },
        },
        default_config={
            "allow_hosts": [],
            "max_bytes": DEFAULT_MAX_BYTES,
            "max_chars": DEFAULT_MAX_CHARS,
            "timeout": DEFAULT_TIMEOUT,
        },
    )
)
