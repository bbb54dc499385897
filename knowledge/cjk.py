"""Chinese and Japanese for PostgreSQL's full-text search, which has no parser for
them: its 'simple' configuration keeps a whole run of ideographs or kana between spaces
and punctuation as one word, so a phrase inside a sentence never matches.

As Elasticsearch's ``cjk`` analyzer and Lucene's CJKBigramFilter do, each run is written
as its overlapping two-character pieces ("带薪年假" → "带薪 薪年 年假"), both in the stored
``tsvector`` and in the query; the words of a query then match wherever they sit, and
``ts_rank_cd`` ranks passages holding more of the pieces, and closer together, higher.
Text without such characters is left as it is.
"""

from __future__ import annotations

import re

__all__ = ["UNSPACED", "bigrams", "has_unspaced", "segment"]

# Scripts written without spaces between words: CJK ideographs, kana, Hangul syllables.
UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


def has_unspaced(text: str) -> bool:
    return UNSPACED.search(text) is not None


def bigrams(run: str) -> list[str]:
    """A run's overlapping pairs of characters (a single character stays itself)."""
    return [run[i : i + 2] for i in range(len(run) - 1)] or [run]


def segment(text: str) -> str:
    """``text`` with every unspaced run replaced by its bigrams, space-separated."""
    return UNSPACED.sub(lambda match: " " + " ".join(bigrams(match.group())) + " ", text)
