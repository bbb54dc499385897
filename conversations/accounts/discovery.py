"""The OpenID Connect provider's endpoints, read from its discovery document.

An admin configures only the issuer (``AGENTSITE_OIDC_ISSUER``); the authorization,
token, userinfo, JWKS and end-session endpoints come from
``<issuer>/.well-known/openid-configuration``, read on first use and kept for
``DISCOVERY_SECONDS`` per process (a provider's keys or endpoints may change; a restart is
not needed to follow them). Nothing is fetched at import or start-up: a provider down at
start does not stop the site, and the login page says it cannot reach it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
from django.conf import settings

__all__ = ["DISCOVERY_SECONDS", "DiscoveryError", "endpoint", "forget", "provider_configuration"]

DISCOVERY_SECONDS = 3600.0
REQUIRED = ("authorization_endpoint", "token_endpoint", "jwks_uri", "userinfo_endpoint")

_lock = threading.Lock()
_cached: tuple[float, dict[str, Any]] | None = None


class DiscoveryError(RuntimeError):
    """The provider's discovery document could not be read or is not usable."""


def provider_configuration() -> dict[str, Any]:
    """The discovery document of the configured issuer (from this process's copy while
    it is fresh)."""
    global _cached
    with _lock:
        if _cached is not None and time.monotonic() - _cached[0] < DISCOVERY_SECONDS:
            return _cached[1]
        document = _fetch(settings.AGENTSITE_OIDC_ISSUER)
        _cached = (time.monotonic(), document)
        return document


def endpoint(name: str) -> str:
    """One endpoint of the provider (``token_endpoint``, ``end_session_endpoint``…), or ""
    if it offers none."""
    value = provider_configuration().get(name)
    return value if isinstance(value, str) else ""


def forget() -> None:
    """Read the document again at the next use (a test changed the provider)."""
    global _cached
    with _lock:
        _cached = None


def _fetch(issuer: str) -> dict[str, Any]:
    issuer = issuer.rstrip("/")
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = httpx.get(url, timeout=settings.OIDC_TIMEOUT, follow_redirects=True)
        response.raise_for_status()
        document = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise DiscoveryError(f"could not read {url}: {exc}") from exc
    if not isinstance(document, dict):
        raise DiscoveryError(f"{url} is not a JSON object")
    missing = [key for key in REQUIRED if not isinstance(document.get(key), str)]
    if missing:
        raise DiscoveryError(f"{url} names no {', '.join(missing)}")
    # OpenID Connect Discovery 1.0, section 4.3: the document must name the issuer asked.
    if str(document.get("issuer", "")).rstrip("/") != issuer:
        raise DiscoveryError(
            f"{url} names the issuer {document.get('issuer')!r}, not {issuer!r}: "
            "check AGENTSITE_OIDC_ISSUER"
        )
    return document
