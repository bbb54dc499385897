"""Retrieval quality on the labelled corpus, on SQLite and on PostgreSQL.

The corpus (``tests/knowledge/corpus/``: 40 team documents in Markdown, plain text, CSV,
and PDF, DOCX and HTML built from text at run time; 60 questions, 15 in Chinese and
Japanese) is added to a knowledge base of a fresh database through
``knowledge.services.document_add`` and indexed by ``knowledge.indexing.index_document``,
the functions background indexing runs. Each question is then searched with
``knowledge.retrieval.search(user, [base_id], question, k=5)``.

Printed per database and retrieval method: recall@5 and MRR by document (a hit from a
labelled document among the first 5; the reciprocal rank of the first, 0 past 5), the
same by passage (the hit's text holds the labelled words), by language and by kind of
question (keyword or paraphrase), every miss, the search's median time and the indexing
time of the corpus.

    .venv/bin/python benchmarks/knowledge_quality.py
        [--databases sqlite,postgres,postgres:simple] [--methods fulltext,vector,fused]
        [--json FILE]

``postgres:simple`` is PostgreSQL with ``AGENTSITE_KNOWLEDGE_SEARCH_CONFIG=simple`` (every
word kept, no stemming; the default is "english").

A method is a name in ``tests.knowledge.quality.METHODS`` (the keywords given to
``retrieval.search``): full text, vectors, or both fused. For "vector" and "fused" the
child starts the scripted server and enables its hashing embedder (``testing.embeddings``)
before indexing: a bag of hashed words, not a model of meaning, so those rows measure
the plumbing and the fusion, not what a real embedding model would find. Vectors need
a Python whose sqlite3 loads extensions on SQLite, and pgvector on PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from knowledge_common import (  # noqa: E402
    DATABASES,
    child_django,
    child_env,
    fresh_database,
    log,
    machine,
    run_child,
    scratch,
)

SCRIPT = Path(__file__).resolve()
GROUPS = (("lang", ("en", "zh", "ja")), ("kind", ("keyword", "paraphrase")))


def child(database: str, methods: list[str]) -> None:
    child_django()
    from django.contrib.auth import get_user_model

    from knowledge import services, vectors
    from knowledge.models import Chunk
    from testing.scripted_server import ScriptedServer
    from tests.knowledge import corpus_build, quality

    files = corpus_build.build()
    user = get_user_model().objects.create_user(username="bench", password="bench-pw-123")
    base = services.base_create(user, "Larkspur handbook")
    embedder = None
    if {"vector", "fused"} & set(methods):
        if vectors.unavailable_reason():
            raise SystemExit(f"vectors: {vectors.unavailable_reason()}")
        embedder = ScriptedServer().start()
        quality.enable_embeddings(embedder.base_url, embedder.embedding_dims)
    started = time.perf_counter()
    names = quality.index_corpus(base, files)
    indexed_s = time.perf_counter() - started
    out = {
        "database": database,
        "documents": len(names),
        "chunks": Chunk.objects.filter(document__base=base).count(),
        "indexed_s": indexed_s,
        "unanswerable": quality.unanswerable(names),
        "methods": {},
    }
    for method in methods:
        quality.evaluate(user, base.pk, names, method)  # warm: caches, plans
        result = quality.evaluate(user, base.pk, names, method)
        out["methods"][method] = {
            "summary": result.summary(),
            "by": {
                f"{key}={value}": result.subset(**{key: value}).summary()
                for key, values in GROUPS
                for value in values
            },
            "report": quality.report(result),
            "misses": [
                {
                    "id": miss.question.id,
                    "question": miss.question.question,
                    "wanted": miss.question.documents,
                    "got": miss.found,
                }
                for miss in result.misses
            ],
        }
    if embedder is not None:
        embedder.stop()
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--databases",
        default=",".join((*DATABASES, "postgres:simple")),
        help="sqlite, postgres, or postgres:CONFIG (AGENTSITE_KNOWLEDGE_SEARCH_CONFIG)",
    )
    parser.add_argument("--methods", default="fulltext,vector,fused")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--child", nargs=2, metavar=("DATABASE", "METHODS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1].split(","))
        return

    from tests.knowledge import corpus_build

    for line in machine():
        log(line)
    files = corpus_build.build()
    asked = corpus_build.questions()
    kinds: dict[str, int] = {}
    for file in files:
        extension = file.name.rpartition(".")[2]
        kinds[extension] = kinds.get(extension, 0) + 1
    formats = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    log(
        f"corpus: {len(files)} documents ({formats}), "
        f"{len(asked)} questions ({sum(q.lang == 'zh' for q in asked)} Chinese, "
        f"{sum(q.lang == 'ja' for q in asked)} Japanese, "
        f"{sum(q.kind == 'paraphrase' for q in asked)} paraphrased)"
    )
    results = {}
    with scratch() as work:
        for database in args.databases.split(","):
            kind, _, config = database.partition(":")
            extra = {"AGENTSITE_KNOWLEDGE_SEARCH_CONFIG": config} if config else {}
            with fresh_database(kind, work) as (url, where):
                log(f"\n== {database}: {where}" + (f", search config {config!r}" if config else ""))
                out = run_child(SCRIPT, [database, args.methods], child_env(work, url, extra))
            results[database] = out
            log(
                f"indexed {out['documents']} documents, {out['chunks']} chunks in "
                f"{out['indexed_s']:.2f} s"
            )
            if out["unanswerable"]:
                log(f"LABELS WITHOUT A MATCHING PASSAGE: {out['unanswerable']}")
            for figures in out["methods"].values():
                log(figures["report"])
    log("\nrecall@5 / MRR by document (by passage)")
    methods = list(next(iter(results.values()))["methods"])
    log("| database | " + " | ".join(methods) + " |")
    log("|---|" + "---|" * len(methods))
    for database, out in results.items():
        cells = []
        for method in methods:
            s = out["methods"][method]["summary"]
            cells.append(
                f"{s['recall']:.3f} / {s['mrr']:.3f} ({s['passage_recall']:.3f} / "
                f"{s['passage_mrr']:.3f})"
            )
        log(f"| {database} | " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
