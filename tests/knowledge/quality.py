"""Retrieval quality on the labelled corpus (:mod:`tests.knowledge.corpus_build`): the
corpus indexed through the real pipeline, each question searched, recall@k and MRR.

Shared by ``tests/knowledge/test_retrieval_quality.py`` (SQLite, the test database) and
``benchmarks/knowledge_quality.py`` (SQLite and PostgreSQL, fresh databases).

The retrieval method is a parameter: :data:`METHODS` maps a name to the keywords given
to :func:`knowledge.retrieval.search`: full text, vectors (of the scripted server's
hashing embedder: :mod:`testing.embeddings`) and the two fused.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge import indexing, retrieval, services
from knowledge.models import Document, KnowledgeBase
from llms.models import EmbeddingModel, Provider
from tests.knowledge.corpus_build import CorpusFile, Question, build, normalized, questions

K = 5

# name -> keywords for retrieval.search ("vector" and "fused" need an enabled embedding
# model when the corpus is indexed: :func:`enable_embeddings`).
METHODS: dict[str, dict[str, Any]] = {
    "fulltext": {"methods": ("fulltext",)},
    "vector": {"methods": ("vector",)},
    "fused": {"methods": ("fulltext", "vector")},
}


def enable_embeddings(base_url: str, dimensions: int) -> EmbeddingModel:
    """The scripted server's hashing embedder as the site's embedding model."""
    provider = Provider.objects.create(name="scripted embeddings", base_url=base_url)
    return EmbeddingModel.objects.create(
        provider=provider, model_id="scripted-hashing", dimensions=dimensions
    )


def searcher(method: str) -> Callable[[Any, list[int], str, int], list[retrieval.Hit]]:
    extra = METHODS[method]

    def search(user: Any, base_ids: list[int], query: str, k: int) -> list[retrieval.Hit]:
        return retrieval.search(user, base_ids, query, k=k, **extra)

    return search


def index_corpus(base: KnowledgeBase, files: Iterable[CorpusFile] | None = None) -> dict[int, str]:
    """Every corpus file added to ``base`` and indexed now, in this process, by the
    functions background indexing runs (its scheduling on commit switched off meanwhile);
    document id -> the corpus name."""
    names: dict[int, str] = {}
    schedule = indexing.schedule
    indexing.schedule = lambda document_id: True  # indexed below
    try:
        for file in files if files is not None else build():
            document = services.document_add(base, SimpleUploadedFile(file.name, file.data))
            status = indexing.index_document(document.pk)
            if status != Document.Status.READY:
                document.refresh_from_db()
                raise RuntimeError(f"{file.name} not indexed: {status} {document.error}")
            names[document.pk] = file.name
    finally:
        indexing.schedule = schedule
    return names


@dataclass
class Outcome:
    question: Question
    found: list[str]  # the hits' corpus names, best first ("" for a document not ours)
    document_rank: int | None  # 1-based rank of the first hit from a labelled document
    passage_rank: int | None  # ... whose text holds a labelled passage
    seconds: float


@dataclass
class Result:
    method: str
    outcomes: list[Outcome] = field(default_factory=list)

    def subset(self, **where: str) -> Result:
        kept = [
            o for o in self.outcomes if all(getattr(o.question, k) == v for k, v in where.items())
        ]
        return Result(self.method, kept)

    @property
    def recall(self) -> float:
        """recall@k by document: a hit from a labelled document among the first k."""
        return _mean([o.document_rank is not None for o in self.outcomes])

    @property
    def mrr(self) -> float:
        """Mean reciprocal rank of the first hit from a labelled document (0 past k)."""
        return _mean([1 / o.document_rank if o.document_rank else 0.0 for o in self.outcomes])

    @property
    def passage_recall(self) -> float:
        return _mean([o.passage_rank is not None for o in self.outcomes])

    @property
    def passage_mrr(self) -> float:
        return _mean([1 / o.passage_rank if o.passage_rank else 0.0 for o in self.outcomes])

    @property
    def misses(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.document_rank is None]

    @property
    def median_ms(self) -> float:
        return statistics.median(o.seconds for o in self.outcomes) * 1000

    def summary(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "questions": len(self.outcomes),
            "recall": self.recall,
            "mrr": self.mrr,
            "passage_recall": self.passage_recall,
            "passage_mrr": self.passage_mrr,
            "median_ms": self.median_ms,
        }


def _mean(values: list[float] | list[bool]) -> float:
    return sum(values) / len(values) if values else float("nan")


def evaluate(
    user: Any,
    base_id: int,
    names: dict[int, str],
    method: str = "fulltext",
    asked: Iterable[Question] | None = None,
    k: int = K,
) -> Result:
    """Each question searched in the base by ``method``; where its answer ranked."""
    search = searcher(method)
    result = Result(method)
    for question in asked if asked is not None else questions():
        started = time.perf_counter()
        hits = search(user, [base_id], question.question, k)
        seconds = time.perf_counter() - started
        found = [names.get(hit.document_id, "") for hit in hits]
        wanted = [normalized(p) for p in question.passages]
        document_rank = passage_rank = None
        for rank, (name, hit) in enumerate(zip(found, hits, strict=True), start=1):
            if name not in question.documents:
                continue
            document_rank = document_rank or rank
            if passage_rank is None and any(p in normalized(hit.text) for p in wanted):
                passage_rank = rank
        result.outcomes.append(Outcome(question, found, document_rank, passage_rank, seconds))
    return result


def unanswerable(names: dict[int, str]) -> list[str]:
    """Labels no indexed passage satisfies (a typo in questions.json, or a passage cut
    in two by chunking): the ids of such questions."""
    from knowledge.models import Chunk

    by_name: dict[str, list[str]] = {}
    for chunk in Chunk.objects.filter(document_id__in=list(names)).only("document_id", "text"):
        by_name.setdefault(names[chunk.document_id], []).append(normalized(chunk.text))
    bad = []
    for question in questions():
        texts = [t for name in question.documents for t in by_name.get(name, [])]
        if any(name not in by_name for name in question.documents) or not any(
            normalized(p) in t for p in question.passages for t in texts
        ):
            bad.append(question.id)
    return bad


def report(result: Result) -> str:
    """A few lines: the figures overall, by language and by kind, then each miss."""
    lines = []

    def row(label: str, part: Result) -> None:
        if part.outcomes:
            lines.append(
                f"  {label:<12} n={len(part.outcomes):<3} recall@{K}={part.recall:.3f} "
                f"MRR={part.mrr:.3f}  passage recall@{K}={part.passage_recall:.3f} "
                f"MRR={part.passage_mrr:.3f}"
            )

    lines.append(f"{result.method}: median search {result.median_ms:.1f} ms")
    row("all", result)
    for lang in ("en", "zh", "ja"):
        row(f"lang={lang}", result.subset(lang=lang))
    for kind in ("keyword", "paraphrase"):
        row(f"{kind}", result.subset(kind=kind))
    for miss in result.misses:
        lines.append(
            f"  miss {miss.question.id} {miss.question.question!r}: "
            f"wanted {miss.question.documents[0]}, got {miss.found}"
        )
    return "\n".join(lines)
