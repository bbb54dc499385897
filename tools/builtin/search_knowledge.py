"""``search_knowledge``: passages of the knowledge bases attached to the conversation.

Offered only to runs of a conversation with knowledge bases, scoped to those bases and
to what the conversation's owner may read. Each passage found gets a number for the
whole run ("[1]", "[2]"…; the same passage keeps its number), which the model cites in
its answer; the chat shows the numbers as sources that open the passage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from engine import Tool, ToolResult

__all__ = ["DEFAULT_K", "MAX_K", "Passage", "search_knowledge_tool"]

DEFAULT_K = 5
MAX_K = 10
PASSAGE_MAX_CHARS = 1500


class Passage(Protocol):
    chunk_id: int
    document_name: str
    page: int | None
    heading: str
    text: str


Search = Callable[[str, int], Sequence[Passage]]


def search_knowledge_tool(search: Search, base_names: Sequence[str]) -> Tool:
    """The tool over ``search(query, k)``; numbers stay the same for the whole run."""
    numbers: dict[int, int] = {}

    def run(query: str, k: int = DEFAULT_K) -> ToolResult:
        query = (query or "").strip()
        if not query:
            return ToolResult("Error: give a query to search for.", is_error=True)
        passages = search(query, max(1, min(int(k), MAX_K)))
        if not passages:
            return ToolResult(f"No passage matches {query!r} in {', '.join(base_names)}.")
        blocks = []
        for passage in passages:
            number = numbers.setdefault(passage.chunk_id, len(numbers) + 1)
            where = passage.document_name
            if passage.page:
                where += f", page {passage.page}"
            if passage.heading:
                where += f", {passage.heading}"
            text = passage.text
            if len(text) > PASSAGE_MAX_CHARS:
                text = text[:PASSAGE_MAX_CHARS] + "…"
            blocks.append(f"[{number}] {where} (chunk {passage.chunk_id})\n{text}")
        return ToolResult(
            "\n\n".join(blocks)
            + "\n\nCite what you use with its number in brackets, e.g. [1], after the claim."
        )

    return Tool(
        name="search_knowledge",
        description=(
            "Search the knowledge bases attached to this conversation ("
            + ", ".join(base_names)
            + ") for passages about a query. Each passage has a number, the same each time "
            "it is found while answering: cite the passages you use by their numbers in "
            "square brackets right after the claim, e.g. [1] or [1, 2]."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_K,
                    "default": DEFAULT_K,
                    "description": "How many passages.",
                },
            },
            "required": ["query"],
        },
        func=run,
    )


def citations(observation: str) -> list[dict[str, Any]]:
    """The numbered passages a ``search_knowledge`` result lists: ``[{number, chunk_id,
    where}]``, read back from the tool card the run stored (so they survive a reload)."""
    found = []
    for line in observation.splitlines():
        if line.startswith("[") and "] " in line and line.endswith(")") and "(chunk " in line:
            number, _, rest = line[1:].partition("] ")
            where, _, chunk = rest.rpartition(" (chunk ")
            if number.isdigit() and chunk[:-1].isdigit():
                found.append({"number": int(number), "chunk_id": int(chunk[:-1]), "where": where})
    return found
