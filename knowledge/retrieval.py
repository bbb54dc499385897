"""Searching the bases a user may read: ranked by the database's full-text search, no
model to download.

English stop words are dropped from the query first (:mod:`knowledge.stopwords`).

- SQLite: FTS5 (:mod:`knowledge.fulltext`, ``trigram`` tokenizer) ranked by ``bm25()``,
  the heading weighted twice the text. Each word of the query is one term, the terms
  OR'ed; a run of Chinese or Japanese longer than 3 characters is split into its
  overlapping 3-character pieces, as the index holds it.
- PostgreSQL: ``SearchQuery`` terms OR'ed, ranked by ``SearchRank`` over the GIN-indexed
  ``tsvector`` (``AGENTSITE_KNOWLEDGE_SEARCH_CONFIG``, "simple" by default); Chinese and
  Japanese as overlapping two-character pieces on both sides (:mod:`knowledge.cjk`).

When the ranked search finds nothing (terms shorter than 3 characters on SQLite, text
without spaces on PostgreSQL, whose parser keeps a run of Chinese as one word), the terms
are matched as substrings (``LIKE``: no index, no ranking; results in document order).

With an enabled embedding model (:mod:`llms.embeddings`) and a database that holds vectors
(:mod:`knowledge.vectors`), the query's vector also ranks the chunks embedded by that
model, and the two rankings are merged by reciprocal rank fusion (each chunk scores
``sum(1 / (60 + rank))`` over the rankings it is in: Cormack et al., 2009), so neither
method's scores need to be comparable. An embedding model that fails leaves full text.
"""

from __future__ import annotations

import logging
import operator
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

from django.conf import settings
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection
from django.db.models import F, Q, QuerySet

from knowledge import cjk, selectors, stopwords, vectors
from knowledge.fulltext import FTS_TABLE
from knowledge.models import Chunk, Document
from llms.embeddings import EmbeddingError, active_embedder

__all__ = ["DEFAULT_K", "MAX_K", "METHODS", "Hit", "fuse", "search"]

logger = logging.getLogger(__name__)

METHODS = ("fulltext", "vector")
RRF_K = 60  # the constant of reciprocal rank fusion (Cormack, Clarke, Buettcher 2009)
FUSION_DEPTH = 20  # candidates each method contributes to fusion, at least
DEFAULT_K = 5
MAX_K = 50
TRIGRAM = 3
MAX_TERMS = 32
WORD = re.compile(r"\w+")


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
    """The query's distinct words, less English stop words unless nothing else is left
    (a search for "the who" still searches)."""
    words = list(dict.fromkeys(WORD.findall(query.lower())))
    meaningful = [word for word in words if word not in stopwords.ENGLISH]
    return (meaningful or words)[:MAX_TERMS]


def _trigram_terms(terms: Iterable[str]) -> list[str]:
    """What FTS5's trigram index can match: words of 3 characters or more, and an unspaced
    run cut into its 3-character pieces (a phrase would need the run verbatim)."""
    found: list[str] = []
    for term in terms:
        if len(term) < TRIGRAM:
            continue
        if cjk.has_unspaced(term) and len(term) > TRIGRAM:
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


def _postgres_terms(terms: Iterable[str]) -> list[str]:
    """The query's words as the stored ``tsvector`` holds them: Chinese and Japanese runs
    as their two-character pieces (:mod:`knowledge.cjk`)."""
    found: list[str] = []
    for term in terms:
        found += cjk.segment(term).split() if cjk.has_unspaced(term) else [term]
    return list(dict.fromkeys(found))[:MAX_TERMS]


def _postgres_ranked(scope: QuerySet[Chunk], terms: list[str], k: int) -> list[tuple[int, float]]:
    config = settings.AGENTSITE_KNOWLEDGE_SEARCH_CONFIG
    pieces = _postgres_terms(terms)
    query = reduce(operator.or_, (SearchQuery(term, config=config) for term in pieces))
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


def _vector_ranked(scope: QuerySet[Chunk], query: str, k: int) -> list[tuple[int, float]]:
    embedder = active_embedder()
    if embedder is None or not vectors.available():
        return []
    try:
        (vector,) = embedder.embed([query])
    except EmbeddingError as exc:
        logger.warning("knowledge search by full text only: %s", exc)
        return []
    return vectors.search(scope.filter(document__embedded_with=embedder.signature), vector, k)


def fuse(rankings: Sequence[Sequence[tuple[int, float]]], k: int) -> list[tuple[int, float]]:
    """Reciprocal rank fusion of ranked ``(chunk id, score)`` lists: ``(id, fused score)``,
    best first, ties by id."""
    scores: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for rank, (chunk_id, _) in enumerate(ranking, start=1):
            scores[chunk_id] += 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]


def search(
    user: Any,
    base_ids: Iterable[int] | None,
    query: str,
    k: int = DEFAULT_K,
    *,
    methods: Sequence[str] = METHODS,
) -> list[Hit]:
    """The ``k`` passages best matching ``query`` in those of ``base_ids`` (None: all) that
    ``user`` may read; ready documents only. Ids of bases the user may not read are
    ignored, as if they did not exist. ``methods`` narrows the rankings used (the
    benchmarks compare them); "vector" counts only where an embedding model is enabled."""
    k = max(1, min(int(k), MAX_K))
    query = (query or "").strip()
    terms = _terms(query)
    if not terms:
        return []
    bases = selectors.readable_bases(user)
    if base_ids is not None:
        bases = bases.filter(id__in=list(base_ids))
    scope = Chunk.objects.filter(
        document__base__in=bases.values("id"), document__status=Document.Status.READY
    )
    depth = max(k, FUSION_DEPTH)
    rankings: list[list[tuple[int, float]]] = []
    if "fulltext" in methods:
        ranker = _postgres_ranked if connection.vendor == "postgresql" else _sqlite_ranked
        rankings.append(ranker(scope, terms, depth) or _substring(scope, terms, depth))
    if "vector" in methods:
        rankings.append(_vector_ranked(scope, query, depth))
    rankings = [ranking for ranking in rankings if ranking]
    ranked = rankings[0][:k] if len(rankings) == 1 else fuse(rankings, k)
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
