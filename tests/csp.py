"""Reading a Content-Security-Policy header in tests (django-csp writes directives in any order)."""

from __future__ import annotations

__all__ = ["parse_policy"]


def parse_policy(header: str) -> dict[str, list[str]]:
    """``"a x y; b"`` as ``{"a": ["x", "y"], "b": []}``."""
    policy: dict[str, list[str]] = {}
    for directive in header.split(";"):
        if directive.strip():
            name, *values = directive.split()
            policy[name] = values
    return policy
