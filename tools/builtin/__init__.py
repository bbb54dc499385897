"""The built-in tools. Importing this package registers every one of them.

``ToolsConfig.ready()`` imports it, so the registry is complete once Django is set up.
"""

from __future__ import annotations

from tools.builtin import (  # noqa: F401  (imported for their register() side effect)
    calculator,
    current_time,
    http_request,
    python_exec,
    web_fetch,
    web_search,
)

__all__ = [
    "calculator",
    "current_time",
    "http_request",
    "python_exec",
    "web_fetch",
    "web_search",
]
