"""The search_knowledge tool numbers passages for citations and reads them back."""

from __future__ import annotations

from dataclasses import dataclass

from tools.builtin.search_knowledge import citations, search_knowledge_tool


@dataclass
class Found:
    chunk_id: int
    document_name: str
    page: int | None
    heading: str
    text: str


LIBRARY = [
    Found(7, "handbook.pdf", 3, "Holidays", "Everyone gets 25 days of holiday."),
    Found(9, "faq.md", None, "", "Holidays are booked in the HR tool."),
]


def search(query: str, k: int) -> list[Found]:
    return [found for found in LIBRARY if query.lower() in found.text.lower()][:k]


def test_passages_keep_their_number_for_the_whole_run_and_read_back() -> None:
    tool = search_knowledge_tool(search, ["Handbook"])
    first = tool.func(query="holiday").content
    assert first.startswith("[1] handbook.pdf, page 3, Holidays (chunk 7)\nEveryone gets 25")
    assert "[2] faq.md (chunk 9)\nHolidays are booked" in first
    again = tool.func(query="booked").content
    assert again.startswith("[2] faq.md (chunk 9)")  # the same passage, the same number
    assert citations(first) == [
        {"number": 1, "chunk_id": 7, "where": "handbook.pdf, page 3, Holidays"},
        {"number": 2, "chunk_id": 9, "where": "faq.md"},
    ]


def test_no_match_and_an_empty_query_say_so() -> None:
    tool = search_knowledge_tool(search, ["Handbook"])
    assert "No passage matches 'pension' in Handbook" in tool.func(query="pension").content
    assert tool.func(query="  ").is_error
