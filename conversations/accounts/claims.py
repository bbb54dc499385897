"""Reading an OpenID Connect provider's claims (no library needed: they are JSON)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

__all__ = ["claim", "group_names"]


def claim(claims: dict[str, Any], path: str) -> Any:
    """A claim by name, or by a dotted path into nested claims (Keycloak's
    ``realm_access.roles``); None when absent."""
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def group_names(claims: dict[str, Any]) -> list[str]:
    """The groups claim (``AGENTSITE_OIDC_GROUPS_CLAIM``) as a list; none if absent."""
    value = claim(claims, settings.AGENTSITE_OIDC_GROUPS_CLAIM)
    if isinstance(value, str):
        return [value]
    return list(value) if isinstance(value, list) else []
