"""The MCP SDK is loaded only to talk to an MCP server: every run reads the user's MCP
server rows, and importing the SDK (0.55 s of CPU here) on a process's first run held up
every stream of that process."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = """
import sys
import django

django.setup()
from django.urls import get_resolver

get_resolver().url_patterns  # every view module, as a server process starts
import conversations.runs.execution, tools.services, tools.mcp.services  # what a run loads
print(sorted(m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "mcp_types"))))
"""


def test_a_run_without_mcp_servers_does_not_load_the_sdk(tmp_path) -> None:
    env = {**os.environ, "AGENTSITE_VAR_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_the_client_module_still_offers_the_plain_types() -> None:
    """Callers that talk to servers keep importing everything from the client module."""
    from tools.mcp import client, endpoints

    assert client.MCPEndpoint is endpoints.MCPEndpoint
    assert client.MCPConnectionError is endpoints.MCPConnectionError
    assert client.MCPToolInfo is endpoints.MCPToolInfo
