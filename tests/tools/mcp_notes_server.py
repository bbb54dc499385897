"""A stdio MCP server whose one tool acts: ``write_note`` appends its text to the file
named on the command line. Built on the MCP SDK's ``MCPServer``, as the reference time
server is; tests read the file to see whether a call ran at all.

Run: ``python tests/tools/mcp_notes_server.py /path/to/notes.txt``
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer


def create_server(notes: Path) -> MCPServer:
    server = MCPServer("mcp-notes")

    @server.tool(name="write_note", description="Append a note to the user's notes file")
    def write_note(text: str) -> str:
        with notes.open("a", encoding="utf-8") as file:
            file.write(text + "\n")
        return f"noted: {text}"

    return server


if __name__ == "__main__":
    create_server(Path(sys.argv[1])).run("stdio")
