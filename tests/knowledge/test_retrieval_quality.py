"""Retrieval quality on the labelled corpus (tests/knowledge/corpus/: 40 team documents in
Markdown, text, CSV, PDF, DOCX and HTML, 60 questions, 15 of them in Chinese and
Japanese), indexed on SQLite through the real pipeline and searched as the agent's tool
searches. ``benchmarks/knowledge_quality.py`` prints the same figures for PostgreSQL too.

The target is recall@5 >= 0.9 for full text (0.917 measured: English stop words are
dropped from the question, so they no longer let wordy passages outrank the answer), and
no part (MRR, keyword questions, Chinese and Japanese) gets worse than measured. Vectors
and fused search are measured by the benchmark (docs/performance.md, "Knowledge
bases"): the scripted server's hashing embedder knows words, not meanings, so its
figures say nothing about a real embedding model's and are not held to the target.
"""

from __future__ import annotations

import pytest

from knowledge import services
from tests.knowledge import corpus_build, quality

pytestmark = pytest.mark.django_db

TARGET_RECALL = 0.9


@pytest.fixture
def indexed(user):
    base = services.base_create(user, "Larkspur handbook")
    return base, quality.index_corpus(base)


def _evaluated(indexed, user, method: str) -> quality.Result:
    base, names = indexed
    # Every label points at a passage that exists once chunked (the questions are fair).
    assert quality.unanswerable(names) == []
    result = quality.evaluate(user, base.pk, names, method)
    print("\n" + quality.report(result))  # shown with -s, or with the failure
    assert len(result.outcomes) == 60
    return result


def test_the_corpus_is_as_labelled() -> None:
    files = corpus_build.build()
    assert {file.name.rpartition(".")[2] for file in files} == {
        "md",
        "txt",
        "csv",
        "pdf",
        "docx",
        "html",
    }
    assert len(files) >= 30
    asked = corpus_build.questions()
    assert len({q.id for q in asked}) == len(asked) == 60
    assert {name for q in asked for name in q.documents} <= {file.name for file in files}
    cjk = [q for q in asked if q.lang in ("zh", "ja")]
    assert len(cjk) >= 10
    assert all(not q.documents[0].isascii() for q in cjk)  # asked of CJK documents


def test_full_text_recall_at_5_reaches_the_target(indexed, user) -> None:
    result = _evaluated(indexed, user, "fulltext")
    report = quality.report(result)
    assert result.recall >= TARGET_RECALL, report  # measured 0.917 (55 of 60)
    # No worse than measured, part by part.
    assert result.mrr >= 0.8, report  # measured 0.831
    assert result.subset(kind="keyword").recall >= 0.95, report  # measured 1.000
    cjk = quality.Result("fulltext", [o for o in result.outcomes if o.question.lang != "en"])
    assert cjk.recall >= 0.8, report  # measured 0.867 (13 of 15)
