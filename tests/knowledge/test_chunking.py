"""Chunks keep the heading trail above them and their page, overlap within a section and
never span two sections or two pages."""

from __future__ import annotations

from knowledge.chunking import split


def test_heading_trail_follows_the_levels() -> None:
    text = "# Guide\n\nIntro.\n\n## Setup\n\nInstall it.\n\n### Linux\n\napt.\n\n## Use\n\nRun it."
    pieces = split(text, size=500)
    assert [(p.heading, p.text) for p in pieces] == [
        ("Guide", "Intro."),
        ("Guide › Setup", "Install it."),
        ("Guide › Setup › Linux", "apt."),
        ("Guide › Use", "Run it."),
    ]


def test_pages_from_the_offsets_and_never_two_in_a_chunk() -> None:
    text = "First page text.\n\nSecond page text.\n\nStill second."
    pages = [0, text.index("Second")]
    pieces = split(text, pages=pages, size=500)
    assert [(p.page, p.text) for p in pieces] == [
        (1, "First page text."),
        (2, "Second page text.\n\nStill second."),
    ]
    assert all(p.page is None for p in split(text, size=500))


def test_neighbours_in_a_section_overlap() -> None:
    paragraphs = [f"Paragraph {n} says something about topic {n}." for n in range(40)]
    pieces = split("# Notes\n\n" + "\n\n".join(paragraphs), size=300, overlap=80)
    assert len(pieces) > 3
    for before, after in zip(pieces, pieces[1:], strict=False):
        assert after.heading == "Notes"
        assert len(before.text) <= 300 + 80
        shared = after.text.split("\n\n")[0]
        assert shared in before.text  # the next one starts with the end of this one
    joined = " ".join(p.text for p in pieces)
    assert all(paragraph in joined for paragraph in paragraphs)  # nothing lost


def test_a_long_block_is_cut_in_overlapping_windows_even_without_spaces() -> None:
    words = " ".join(f"word{n}" for n in range(400))
    pieces = split(words, size=200, overlap=50)
    assert all(len(p.text) <= 200 for p in pieces)
    assert all(p.text.split()[0].startswith("word") for p in pieces)  # cut at words
    chinese = "知识库检索增强生成" * 100
    cut = split(chinese, size=120, overlap=30)
    assert all(len(p.text) <= 120 for p in cut)
    assert cut[0].text[-30:] == cut[1].text[:30]  # overlapping
    assert "".join(p.text[30:] if i else p.text for i, p in enumerate(cut)) == chinese


def test_no_text_no_chunks() -> None:
    assert split("") == []
    assert split("# Only a heading\n\n   \n\n") == []
