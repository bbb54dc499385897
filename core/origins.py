"""Websocket origin check: only pages of the site itself may open its sockets.

channels' ``AllowedHostsOriginValidator`` compares host names only. Cookies are not
scoped by port, and SameSite counts every port and scheme of a host as the same site, so
a page served from ``http://127.0.0.1:9999`` (or a plain-http page next to the https
site) could open a victim's conversation socket with the victim's session cookie.

The rule here is the one Django's CSRF check applies to every POST of the site, so the
two cannot disagree:

- the ``Origin`` must be the origin the handshake was sent to: the connection's scheme
  (``wss``, or the ``SECURE_PROXY_SSL_HEADER`` a TLS-terminating proxy sends, as for
  ``request.is_secure()``), the ``Host`` header (which must be in ``ALLOWED_HOSTS``) and
  its port. This needs no configuration on any port (``make run``, the test stacks on
  random ports, several servers side by side);
- or one of ``CSRF_TRUSTED_ORIGINS`` (scheme, host and port; ``https://*.example.com``
  for subdomains), for a proxy that rewrites the Host or does not say it terminated TLS.

A missing or ``null`` Origin is refused: browsers send one on every websocket handshake,
and other clients can send whatever Origin they like, so refusing them costs no security
and only asks scripts to send the site's origin.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

__all__ = ["OriginCheck", "handshake_origin", "origin_allowed", "parse_origin"]

logger = logging.getLogger(__name__)

Origin = tuple[str, str, int]  # scheme, host (lower case, IPv6 without brackets), port
Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Any]

DEFAULT_PORTS = {"http": 80, "https": 443}
# Django's own fallback when DEBUG is on and ALLOWED_HOSTS is empty (HttpRequest.get_host).
DEBUG_HOSTS = [".localhost", "127.0.0.1", "[::1]"]


def parse_origin(value: str) -> Origin | None:
    """``(scheme, host, port)`` of a serialised origin; None for ``null`` or a non-origin.

    Default ports are made explicit, so ``https://a.test`` equals ``https://a.test:443``.
    """
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if (
        parts.scheme not in DEFAULT_PORTS
        or not parts.hostname
        or "@" in parts.netloc
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        return None
    return parts.scheme, parts.hostname.rstrip("."), port or DEFAULT_PORTS[parts.scheme]


def handshake_origin(scope: Scope) -> Origin | None:
    """The origin the handshake was sent to, or None when its Host is not an allowed one."""
    hosts = _header_values(scope, b"host")
    if len(hosts) != 1:
        return None
    domain, _port = split_domain_port(hosts[0])
    allowed_hosts = settings.ALLOWED_HOSTS or (DEBUG_HOSTS if settings.DEBUG else [])
    if not domain or not validate_host(domain, allowed_hosts):
        return None
    scheme = "https" if _is_secure(scope) else "http"
    return parse_origin(f"{scheme}://{hosts[0]}")


def origin_allowed(scope: Scope) -> bool:
    """True when the handshake's one ``Origin`` is the site's own or a trusted one."""
    values = _header_values(scope, b"origin")
    origin = parse_origin(values[0]) if len(values) == 1 else None
    own = handshake_origin(scope)
    if origin is None or own is None:
        return False
    return origin == own or _trusted(origin, settings.CSRF_TRUSTED_ORIGINS)


class OriginCheck:
    """ASGI middleware: a websocket handshake from another origin is refused (HTTP 403)."""

    def __init__(self, application: ASGIApp) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            logger.warning(
                "websocket refused: Origin %r is neither the site's own nor in "
                "CSRF_TRUSTED_ORIGINS (Host %r)",
                _header_values(scope, b"origin"),
                _header_values(scope, b"host"),
            )
            message = await receive()
            if message["type"] == "websocket.connect":
                # Closing before accepting: the server answers the handshake with 403.
                await send({"type": "websocket.close"})
            return
        await self.application(scope, receive, send)


def _header_values(scope: Scope, name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in scope.get("headers", ()) if key == name]


def _is_secure(scope: Scope) -> bool:
    """As ``HttpRequest.is_secure()``: a TLS connection, or the proxy's trusted header."""
    if scope.get("scheme") in ("wss", "https"):
        return True
    proxy_header = settings.SECURE_PROXY_SSL_HEADER
    if not proxy_header:
        return False
    meta_name, secure_value = proxy_header
    header = meta_name.removeprefix("HTTP_").lower().replace("_", "-").encode("latin-1")
    values = _header_values(scope, header)
    return bool(values) and values[0].split(",")[0].strip() == secure_value


def _trusted(origin: Origin, trusted: Iterable[str]) -> bool:
    """``origin`` is one of ``trusted`` (Django's CSRF_TRUSTED_ORIGINS syntax)."""
    scheme, host, port = origin
    for entry in trusted:
        wildcard = "://*." in entry
        pattern = parse_origin(entry.replace("://*.", "://", 1) if wildcard else entry)
        if pattern is None or pattern[0] != scheme or pattern[2] != port:
            continue
        if host == pattern[1] or (wildcard and host.endswith("." + pattern[1])):
            return True
    return False
