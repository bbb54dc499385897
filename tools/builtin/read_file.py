"""``read_file``: a part of a file attached to the conversation, for files too long to
show the model whole (``conversations/history/attachments.py`` names them with their id).

Offered only to runs of a conversation with such a file, scoped to that conversation's
files of its owner: a model cannot read another user's file, or one of another chat, by
guessing an id.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from engine import Tool, ToolResult
from files.models import StoredFile

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "read_file_tool"]

DEFAULT_LIMIT = 6000
MAX_LIMIT = 20000


def read_part(stored: StoredFile, offset: int, limit: int) -> ToolResult:
    """Characters ``offset`` to ``offset + limit`` of the file's text, saying where they
    lie (and on which pages, for a PDF) and where to go on."""
    total = len(stored.text)
    if offset >= total:
        return ToolResult(
            f"Error: offset {offset} is past the end of {stored.name} ({total} characters).",
            is_error=True,
        )
    end = min(total, offset + limit)
    where = f"characters {offset}-{end} of {total}"
    if stored.pages:
        first = sum(1 for start in stored.pages if start <= offset)
        last = sum(1 for start in stored.pages if start < end)
        where += f", page {first}" if first == last else f", pages {first}-{last}"
    more = f"\n[more: read_file(file_id={stored.pk}, offset={end})]" if end < total else ""
    return ToolResult(f"{stored.name} ({where}):\n{stored.text[offset:end]}{more}")


def read_file_tool(find: Callable[[int], StoredFile | None], file_ids: Collection[int]) -> Tool:
    """The tool over ``file_ids``; ``find`` loads one (synchronous: the engine runs a
    plain function in a thread)."""
    allowed = set(file_ids)

    def run(file_id: int, offset: int = 0, limit: int = DEFAULT_LIMIT) -> ToolResult:
        stored = find(file_id) if file_id in allowed else None
        if stored is None:
            known = ", ".join(str(i) for i in sorted(allowed))
            return ToolResult(
                f"Error: no file {file_id} in this conversation (its files: {known}).",
                is_error=True,
            )
        return read_part(stored, max(0, offset), max(1, min(limit, MAX_LIMIT)))

    return Tool(
        name="read_file",
        description=(
            "Read part of a file attached to this conversation that was too long to show "
            "whole (its file_id is in the message). Returns up to `limit` characters from "
            "`offset`; call again with the offset it gives to read on."
        ),
        parameters={
            "type": "object",
            "properties": {
                "file_id": {"type": "integer", "description": "The file's id."},
                "offset": {"type": "integer", "minimum": 0, "default": 0},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "default": DEFAULT_LIMIT,
                },
            },
            "required": ["file_id"],
        },
        func=run,
    )
