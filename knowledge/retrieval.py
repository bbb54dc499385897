"""Searching the bases a user may read: ranked by the database's full-text search, no
model to download.

- SQLite: FTS5 (:mod:`knowledge.fulltext`, ``trigram`` tokenizer) ranked by ``bm25()``,
  the heading weighted twice the text. Each word of the query is one term, the terms
  OR'ed; a run of Chinese or Japanese longer than 3 characters is split into its
  overlapping 3-character pieces, as the index holds it.
- PostgreSQL: ``SearchQuery`` terms OR'ed, ranked by ``SearchRank`` over the GIN-indexed
  ``tsvector`` (``AGENTSITE_KNOWLEDGE_SEARCH_CONFIG``, "simple" by default).

When the ranked search finds nothing (terms shorter than 3 characters on SQLite, text
without spaces on PostgreSQL, whose parser keeps a run of Chinese as one word), the terms
are matched as substrings (``LIKE``: no index, no ranking; results in document order).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce
from typing import Any

from django.conf import settings
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection
from django.db.models import F, Q, QuerySet

from knowledge import selectors
from knowledge.fulltext import FTS_TABLE
from knowledge.models import Chunk, Document

__all__ = ["DEFAULT_K", "MAX_K", "Hit", "search"]

DEFAULT_K = 5
MAX_K = 50
TRIGRAM = 3
MAX_TERMS = 32
WORD = re.compile(r"\w+")
# Scripts written without spaces between words: CJK ideographs, kana, Hangul syllables.
UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


@dataclass(frozen=True)
class Hit:
    chunk_id: int
    document_id: int
    document_name: str
    page: int | None
    heading: str
    text: str
    score: float  # higher is better; comparable within one search only


def _terms(query: str) -> list[str]:
    return list(dict.fromkeys(WORD.findall(query.lower())))[:MAX_TERMS]


def _trigram_terms(terms: Iterable[str]) -> list[str]:
    """What FTS5's trigram index can match: words of 3 characters or more, and an unspaced
    run cut into its 3-character pieces (a phrase would need the run verbatim)."""
    found: list[str] = []
    for term in terms:
        if len(term) < TRIGRAM:
            continue
        if UNSPACED.search(term) and len(term) > TRIGRAM:
            found += [term[i : i + TRIGRAM] for i in range(len(term) - TRIGRAM + 1)]
        else:
            found.append(term)
    return list(dict.fromkeys(found))


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _sqlite_ranked(scope: QuerySet[Chunk], terms: list[str], k: int) -> list[tuple[int, float]]:
    pieces = _trigram_terms(terms)
    if not pieces:
        return []
    scope_sql, scope_params = scope.values("id").query.sql_with_params()
    # The matches first, then the scope: given ``rowid IN (...)`` beside MATCH, SQLite
    # would look each chunk in scope up in the index (about 1000 times slower).
    sql = (
        f"WITH matched AS MATERIALIZED (SELECT rowid AS id, bm25({FTS_TABLE}, 2.0, 1.0) "
        f"AS rank FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s) "
        f"SELECT id, rank FROM matched WHERE id IN ({scope_sql}) ORDER BY rank LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [" OR ".join(map(_quoted, pieces)), *scope_params, k])
        return [(row[0], -row[1]) for row in cursor.fetchall()]  # bm25: lower is better


def _postgres_ranked(scope: QuerySet[Chunk], terms: list[str], k: int) -> list[tuple[int, float]]:
    config = settings.AGENTSITE_KNOWLEDGE_SEARCH_CONFIG
    query = reduce(operator.or_, (SearchQuery(term, config=config) for term in terms))
    ranked = (
        scope.filter(search=query)
        .annotate(score=SearchRank(F("search"), query, cover_density=True))
        .order_by("-score", "id")
        .values_list("id", "score")[:k]
    )
    return list(ranked)


def _substring(scope: QuerySet[Chunk], terms: list[str], k: int) -> list[tuple[int, float]]:
    matches = reduce(
        operator.or_, (Q(text__icontains=term) | Q(heading__icontains=term) for term in terms)
    )
    ids = scope.filter(matches).order_by("document_id", "position").values_list("id", flat=True)
    return [(chunk_id, 0.0) for chunk_id in ids[:k]]


def search(user: Any, base_ids: Iterable[int] | None, query: str, k: int = DEFAULT_K) -> list[Hit]:
    """The ``k`` passages best matching ``query`` in those of ``base_ids`` (None: all) that
    ``user`` may read; ready documents only. Ids of bases the user may not read are
    ignored, as if they did not exist."""
    k = max(1, min(int(k), MAX_K))
    terms = _terms(query or "")
    if not terms:
        return []
    bases = selectors.readable_bases(user)
    if base_ids is not None:
        bases = bases.filter(id__in=list(base_ids))
    scope = Chunk.objects.filter(
        document__base__in=bases.values("id"), document__status=Document.Status.READY
    )
    ranker = _postgres_ranked if connection.vendor == "postgresql" else _sqlite_ranked
    ranked = ranker(scope, terms, k) or _substring(scope, terms, k)
    chunks = Chunk.objects.select_related("document").in_bulk([cid for cid, _ in ranked])
    return [
        Hit(
            chunk_id=chunk.pk,
            document_id=chunk.document_id,
            document_name=chunk.document.name,
            page=chunk.page,
            heading=chunk.heading,
            text=chunk.text,
            score=float(score),
        )
        for chunk_id, score in ranked
        if (chunk := chunks.get(chunk_id)) is not None
    ]
