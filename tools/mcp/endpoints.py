"""What a run needs to know about an MCP server without the SDK loaded.

Importing the ``mcp`` SDK (and the pydantic models it builds) costs about 0.55 s of CPU
here. Every run reads the MCP server rows a user may use, most users have none, and a
process imported the SDK on its first run, holding up every stream of the process for
that long. These plain types let :mod:`tools.mcp.services` describe servers and tools;
the SDK is imported only to talk to a server (:mod:`tools.mcp.client`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class MCPConnectionError(Exception):
    """The server could not be started or reached, or did not answer in time."""


@dataclass(frozen=True)
class MCPEndpoint:
    name: str
    transport: str  # "stdio" | "http"
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 30.0

    def key(self) -> tuple[Any, ...]:
        """Identity for session reuse: two rows with the same settings share a session."""
        return (
            self.transport, self.command, self.args, tuple(sorted(self.env.items())),
            self.url, tuple(sorted(self.headers.items())), self.timeout,
        )  # fmt: skip


@dataclass(frozen=True)
class MCPToolInfo:
    name: str
    description: str
    input_schema: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }
