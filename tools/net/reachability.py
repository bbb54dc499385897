"""Is the public internet reachable from here? Tools that need it are not offered without it.

A model offered ``web_fetch`` on a machine without internet calls it for arithmetic and
collects connection errors. The check resolves and connects to one public host
(``AGENTSITE_NETWORK_PROBE``), with a short timeout, and is remembered for a few minutes
in the site's cache (shared by every process in team mode) so run set-up does not pay for
it each time.
"""

from __future__ import annotations

import socket

from django.conf import settings
from django.core.cache import cache

__all__ = ["NETWORK_UNREACHABLE", "public_network_problem"]

CONNECT_TIMEOUT = 1.5
REMEMBER_REACHABLE = 300.0
REMEMBER_UNREACHABLE = 60.0  # a network that comes back is noticed within a minute
NETWORK_UNREACHABLE = "the public internet is not reachable from this server"


def public_network_problem() -> str:
    """Why tools cannot reach the public internet ("" when they can), per the settings."""
    mode = str(settings.AGENTSITE_TOOLS_NETWORK).lower()
    if mode == "on":
        return ""
    if mode == "off":
        return "AGENTSITE_TOOLS_NETWORK is off"
    probe = str(settings.AGENTSITE_NETWORK_PROBE)
    key = f"tools:network:{probe}"
    cached = cache.get(key)
    if cached is not None:
        return str(cached)
    problem = _connect_problem(probe)
    cache.set(key, problem, REMEMBER_UNREACHABLE if problem else REMEMBER_REACHABLE)
    return problem


def _connect_problem(probe: str) -> str:
    host, _, port = probe.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT):
            return ""
    except (OSError, ValueError) as exc:
        return f"{NETWORK_UNREACHABLE} ({probe}: {type(exc).__name__})"
