"""``http_request``: admin-defined HTTP endpoints (internal APIs) exposed as tools.

Each endpoint in the config becomes one tool named after it::

    {"endpoints": [{"name": "get_order", "description": "Look up an order",
                    "method": "GET", "url_template": "https://shop.internal/orders/{order_id}",
                    "headers": {"Accept": "application/json"},
                    "parameters": {"type": "object",
                                   "properties": {"order_id": {"type": "string"}},
                                   "required": ["order_id"]},
                    "cross_origin_redirects": "refuse",
                    "requires_confirmation": false}],
     "secret_headers": "{\"get_order\": {\"Authorization\": \"Bearer ...\"}}",
     "allow_origins": ["https://shop.internal"]}

``{placeholders}`` in the URL are filled from the arguments, each percent-encoded as one
path segment or query value (a ``/``, ``?`` or ``@`` in a value cannot change the URL's
shape, and a path segment that would be empty, ``.`` or ``..`` is refused: it would climb
out of the template's path); the remaining arguments go in the query string (GET,
DELETE, HEAD) or the JSON body. ``secret_headers`` (stored encrypted) maps an endpoint
name, or ``*`` for all, to headers such as API keys.

The SSRF guard applies unless the URL's origin (scheme, host and port) is in
``allow_origins``. The older ``allow_hosts`` opened every port of a host; it now opens
only the endpoints' own origins on the hosts it names. A redirect to another origin is
not followed (``cross_origin_redirects: "refuse"``, the default) or followed without the
endpoint's headers and secret headers (``"follow_without_headers"``). A call of an
endpoint with another method than GET needs the user's confirmation unless the admin set
``requires_confirmation`` to false (:func:`call_needs_confirmation`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import jsonschema
from django.utils.translation import gettext as _

from engine import Tool, ToolResult
from tools.builtin.web_fetch import truncate
from tools.net.guard import NetPolicy, UnsafeURLError, parse_ip_literal
from tools.net.safehttp import DROP_HEADERS, REFUSE, FetchError, safe_request
from tools.registry import ToolContext, ToolSpec, register

__all__ = [
    "allowed_origins",
    "call_needs_confirmation",
    "fill_url_template",
    "request_preview",
    "secret_header_names",
    "tool_name_for",
]

logger = logging.getLogger(__name__)

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
DEFAULT_TIMEOUT = 15.0
DEFAULT_MAX_BYTES = 1024 * 1024
DEFAULT_MAX_CHARS = 20_000
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
_ORIGIN_PATTERN = r"^https?://[^/?#@\s]+/?$"
# Path segments a value must not make: they would climb out of the template's path.
_DOT_SEGMENTS = frozenset({"", ".", ".."})
# What an endpoint may do on a redirect to another origin (tools.net.safehttp): never keep
# its headers, which may carry credentials.
REDIRECT_POLICIES = (REFUSE, DROP_HEADERS)


class TemplateError(ValueError):
    pass


def tool_name_for(name: str) -> str:
    return (_NAME_CHARS.sub("_", name).strip("_") or "endpoint")[:64]


def fill_url_template(template: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(URL, unused arguments): each ``{name}`` replaced by its percent-encoded value.

    A value is one path segment (or one query value): ``/`` and every other reserved
    character is percent-encoded, and a path segment a value leaves empty, ``.`` or
    ``..`` is refused, since clients and servers resolve those (``/u/{id}/x`` with
    ``..`` would reach ``/x``).
    """
    used: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in arguments or arguments[key] is None:
            raise TemplateError(f"missing argument '{key}' for the URL")
        used.add(key)
        value = arguments[key]
        text = json.dumps(value) if isinstance(value, dict | list | bool) else str(value)
        return quote(text, safe="")

    def fill_segment(segment: str) -> str:
        filled = _PLACEHOLDER.sub(replace, segment)
        if filled != segment and filled in _DOT_SEGMENTS:
            names = ", ".join(f"'{m}'" for m in _PLACEHOLDER.findall(segment))
            raise TemplateError(
                f"argument {names} cannot be empty, '.' or '..': it is a path segment"
            )
        return filled

    query_at = min((i for i in (template.find("?"), template.find("#")) if i >= 0), default=-1)
    path, query = (template, "") if query_at < 0 else (template[:query_at], template[query_at:])
    url = "/".join(fill_segment(segment) for segment in path.split("/"))
    url += _PLACEHOLDER.sub(replace, query)
    rest = {k: v for k, v in arguments.items() if k not in used and v is not None}
    return url, rest


def call_needs_confirmation(
    endpoint: Mapping[str, Any], arguments: Mapping[str, Any] | None = None
) -> bool:
    """Whether a call of ``endpoint`` (one entry of the config's ``endpoints``) must wait
    for the user's confirmation before it is sent.

    The admin's ``requires_confirmation`` when set; otherwise True for every method but
    GET: a POST, PUT, PATCH or DELETE of an internal API acts (orders, tickets,
    deletions), and the model chooses when to call it. ``arguments`` do not change the
    answer yet; they are taken so that a per-call rule needs no change at the call site.
    """
    explicit = endpoint.get("requires_confirmation")
    if isinstance(explicit, bool):
        return explicit
    return str(endpoint.get("method") or "GET").upper() != "GET"


def allowed_origins(config: Mapping[str, Any]) -> list[str]:
    """The origins the endpoints may reach despite the SSRF guard.

    ``allow_origins``, plus, for configurations written before it, the endpoints' own
    origins on the hosts the older ``allow_hosts`` names: that setting opened every port
    of a host, and now opens only the origins the admin configured endpoints on.
    """
    origins = [str(o) for o in config.get("allow_origins") or ()]
    legacy = NetPolicy(allow_hosts=config.get("allow_hosts") or ())
    for endpoint in config.get("endpoints") or ():
        try:
            parts = urlsplit(str(endpoint["url_template"]))
            host = parts.hostname or ""
            port = parts.port
        except (KeyError, TypeError, ValueError):
            continue
        if not host or "{" in host:
            continue
        ip = parse_ip_literal(host)
        if legacy.host_allowed(host) or (ip is not None and legacy.ip_allowed(ip)):
            netloc = f"[{host}]" if ":" in host else host
            origins.append(f"{parts.scheme}://{netloc}{f':{port}' if port else ''}")
    return origins


def _secret_headers(config: dict[str, Any]) -> dict[str, dict[str, str]]:
    raw = config.get("secret_headers") or {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {}
    if not isinstance(raw, dict):
        return {}
    return {
        str(name): {str(k): str(v) for k, v in headers.items()}
        for name, headers in raw.items()
        if isinstance(headers, dict)
    }


def _body_text(content: bytes, content_type: str, charset: str | None) -> str:
    text = content.decode(charset or "utf-8", errors="replace")
    if "json" in content_type:
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    if content_type.startswith("text/") or "xml" in content_type or not content_type:
        return text
    return f"({len(content):,} bytes of {content_type})"


def _endpoint_tool(
    endpoint: dict[str, Any], config: dict[str, Any], secrets: dict[str, dict[str, str]]
) -> Tool:
    name = tool_name_for(str(endpoint["name"]))
    method = str(endpoint.get("method") or "GET").upper()
    if method not in METHODS:
        raise ValueError(f"endpoint {name}: unsupported method {method}")
    template = str(endpoint["url_template"])
    headers = {str(k): str(v) for k, v in (endpoint.get("headers") or {}).items()}
    headers.update(secrets.get("*", {}))
    headers.update(secrets.get(str(endpoint["name"]), {}))
    credentials = secret_header_names(endpoint, secrets)
    parameters = endpoint.get("parameters") or {"type": "object", "properties": {}}
    cross_origin = str(endpoint.get("cross_origin_redirects") or REFUSE)
    if cross_origin not in REDIRECT_POLICIES:
        raise ValueError(f"endpoint {name}: unknown cross_origin_redirects {cross_origin}")
    policy = NetPolicy(allow_origins=allowed_origins(config))
    timeout = float(config.get("timeout") or DEFAULT_TIMEOUT)
    max_bytes = int(config.get("max_bytes") or DEFAULT_MAX_BYTES)
    max_chars = int(config.get("max_chars") or DEFAULT_MAX_CHARS)

    async def call(**arguments: Any) -> ToolResult:
        try:
            url, rest = fill_url_template(template, arguments)
        except TemplateError as exc:
            return ToolResult(f"Error: {exc}", is_error=True)
        body = rest if method in BODY_METHODS else None
        params = None if method in BODY_METHODS else rest
        try:
            response = await safe_request(
                method, url, policy=policy, headers=headers, params=params or None, json=body,
                max_bytes=max_bytes, timeout=timeout, cross_origin=cross_origin,
            )  # fmt: skip
        except UnsafeURLError as exc:
            return ToolResult(f"Error: URL refused: {exc}", is_error=True)
        except FetchError as exc:
            return ToolResult(f"Error: {exc}", is_error=True)
        text = truncate(
            _body_text(response.content, response.content_type, response.charset), max_chars
        )
        status = f"HTTP {response.status_code}"
        if response.status_code >= 400:
            return ToolResult(f"Error: {status}\n{text}", is_error=True)
        return ToolResult(f"{status}\n{text}")

    def needs_approval(arguments: dict[str, Any]) -> str | None:
        if not call_needs_confirmation(endpoint, arguments):
            return None
        # Shown to the user on the approval card (never sent to the model), above the
        # concrete request (preview).
        if method == "GET":
            return _("An administrator asked that each call of this endpoint be confirmed.")
        return _("A %(method)s request may change data on the system it is sent to.") % {
            "method": method
        }

    def preview(arguments: dict[str, Any]) -> dict[str, Any]:
        return request_preview(method, template, arguments, credentials)

    return Tool(
        name=name,
        description=str(endpoint.get("description") or f"Call {method} {template}"),
        parameters=parameters,
        func=call,
        timeout=timeout + 5,
        confirm_if=needs_approval,
        preview=preview,
    )


def secret_header_names(
    endpoint: Mapping[str, Any], secrets: Mapping[str, Mapping[str, str]]
) -> list[str]:
    """The names of the headers a call of ``endpoint`` takes from the configured secret
    headers (``*`` and its own), never their values: what the approval card says it
    would send. [] when the administrator set none for it."""
    names = {*secrets.get("*", {}), *secrets.get(str(endpoint.get("name")), {})}
    return sorted(names, key=str.lower)


def request_preview(
    method: str, template: str, arguments: Mapping[str, Any], credentials: list[str]
) -> dict[str, Any]:
    """The request a call would send, as the user approves it: the method, the URL with
    the arguments filled in (and the query string of a GET, DELETE or HEAD), the JSON
    body (POST, PUT, PATCH; None otherwise) and the names of its credentials. A URL the
    arguments cannot fill stays the template (the call then fails without sending)."""
    try:
        url, rest = fill_url_template(template, dict(arguments))
    except TemplateError:
        return {"method": method, "url": template, "body": None, "credentials": credentials}
    if method in BODY_METHODS:
        return {"method": method, "url": url, "body": rest, "credentials": credentials}
    if rest:
        url = str(httpx.URL(url).copy_merge_params(rest))
    return {"method": method, "url": url, "body": None, "credentials": credentials}


def _unavailable(config: dict[str, Any]) -> str:
    return "" if config.get("endpoints") else _("no endpoint is configured")


def build(config: dict[str, Any], context: ToolContext) -> list[Tool]:
    """One tool per endpoint; a malformed endpoint is logged and skipped, not fatal."""
    secrets = _secret_headers(config)
    tools: list[Tool] = []
    for endpoint in config.get("endpoints") or []:
        try:
            tools.append(_endpoint_tool(endpoint, config, secrets))
        except (KeyError, TypeError, ValueError, jsonschema.SchemaError) as exc:
            logger.warning("http_request: skipping endpoint %r: %s", endpoint, exc)
    return tools


ENDPOINT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
        "description": {"type": "string"},
        "method": {"type": "string", "enum": list(METHODS)},
        "url_template": {"type": "string", "pattern": "^https?://"},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "parameters": {"type": "object"},
        "cross_origin_redirects": {
            "type": "string",
            "enum": list(REDIRECT_POLICIES),
            "default": REFUSE,
            "description": "A redirect to another origin (scheme, host or port): not "
            "followed (refuse), or followed without the headers and secret headers.",
        },
        "requires_confirmation": {
            "type": "boolean",
            "description": "The user confirms each call before it is sent. Default: true "
            "for every method but GET.",
        },
    },
    "required": ["name", "url_template"],
}

SPEC = register(
    ToolSpec(
        name="http_request",
        description="Admin-defined HTTP endpoints exposed as tools (one tool per endpoint).",
        build=build,
        unavailable=_unavailable,
        config_schema={
            "type": "object",
            "properties": {
                "endpoints": {"type": "array", "items": ENDPOINT_SCHEMA},
                "secret_headers": {
                    "type": "string",
                    "x-secret": True,
                    "description": 'JSON: {"<endpoint name>" or "*": {"Header": "value"}}, '
                    "stored encrypted.",
                },
                "allow_origins": {
                    "type": "array",
                    "items": {"type": "string", "pattern": _ORIGIN_PATTERN},
                    "description": "Internal origins, http(s)://host[:port], the endpoints "
                    "may reach despite the private-address guard: that scheme, host and port "
                    "only.",
                },
                "allow_hosts": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Deprecated: use allow_origins. Opens only the "
                    "endpoints' own origins on these hosts.",
                },
                "timeout": {"type": "number", "minimum": 1, "default": DEFAULT_TIMEOUT},
                "max_bytes": {"type": "integer", "minimum": 1024, "default": DEFAULT_MAX_BYTES},
                "max_chars": {"type": "integer", "minimum": 500, "default": DEFAULT_MAX_CHARS},
            },
        },
        default_config={"endpoints": [], "allow_origins": []},
    )
)
