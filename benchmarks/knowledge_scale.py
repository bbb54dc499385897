"""Knowledge bases at scale: indexing throughput, and search latency at 10,000 and 100,000
chunks, on SQLite and on PostgreSQL.

Per database, in a child process on a fresh database:

1. **Indexing throughput**, through the real path: ``knowledge.services.document_add``
   (store, detect, extract) then ``knowledge.indexing.index_document`` (chunk, write the
   rows and the index), for text (Markdown, a page being 3,000 characters) and for PDF
   (generated, one page of about 3,000 characters each), ``--docs`` documents of
   ``--pages`` pages each. Pages per second over both steps, and each step's share.
2. **Search latency**: a base holding the labelled corpus (tests/knowledge/corpus, indexed
   for real) plus filler chunks up to each level (``--levels``, default 10,000 and
   100,000 chunks). Filler text comes from a Markov chain over the corpus's own words
   (about 900 characters a chunk; 15% of the chunks Chinese/Japanese from the corpus's
   characters), in documents of 100 chunks, bulk-inserted: on SQLite the FTS5 triggers
   index each row as indexing's inserts do; on PostgreSQL the ``search`` tsvector is then
   written by ``knowledge.fulltext.write_postgres``, as indexing writes it (Chinese and
   Japanese as two-character pieces), and the table analysed
   (autovacuum would, later). A marker word in the last filler chunk is searched to
   check the index holds the bulk rows. Then the 60 corpus questions are searched
   through ``knowledge.retrieval.search(user, [base], q, k=5)``, ``--repeats`` times
   after one warm-up pass: p50 and p95 (nearest rank), English and Chinese/Japanese
   apart, and recall@5 of the real answers among the filler; then again with English
   stop words dropped from each question (what that change to retrieval would give).

    .venv/bin/python benchmarks/knowledge_scale.py [--databases sqlite,postgres]
        [--levels 10000,100000] [--docs 10] [--pages 20] [--repeats 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

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
from percentiles import pct  # noqa: E402

SCRIPT = Path(__file__).resolve()
PAGE_CHARS = 3000
FILLER_CHUNK_CHARS = 900
CHUNKS_PER_DOCUMENT = 100
CJK_SHARE = 0.15
BATCH = 2000


def _uploaded(name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


def throughput(user: Any, docs: int, pages: int) -> dict[str, Any]:
    from knowledge import indexing, services
    from knowledge.models import Document
    from tests.knowledge.corpus_build import Babbler, pdf_of_pages

    babbler = Babbler(seed=11)
    base = services.base_create(user, "Throughput")
    out: dict[str, Any] = {}
    for kind in ("text", "pdf"):
        add_s = index_s = 0.0
        chunks = size = 0
        for n in range(docs):
            page_texts = [babbler.paragraphs(PAGE_CHARS) for _ in range(pages)]
            if kind == "pdf":
                name, data = f"report-{n}.pdf", pdf_of_pages(page_texts)
            else:
                name, data = f"notes-{n}.md", "\n\n".join(page_texts).encode()
            size += len(data)
            started = time.perf_counter()
            document = services.document_add(base, _uploaded(name, data))
            added = time.perf_counter()
            status = indexing.index_document(document.pk)
            index_s += time.perf_counter() - added
            add_s += added - started
            assert status == Document.Status.READY, (name, status)
            document.refresh_from_db()
            chunks += document.chunk_count
        total_pages = docs * pages
        out[kind] = {
            "documents": docs,
            "pages": total_pages,
            "bytes": size,
            "chunks": chunks,
            "add_s": add_s,
            "index_s": index_s,
            "pages_per_s": total_pages / (add_s + index_s),
            "chunks_per_s_indexing": chunks / index_s,
        }
    services.base_delete(base)
    return out


class Filler:
    """Filler documents and chunks, inserted in bulk into ``base``."""

    def __init__(self, base: Any) -> None:
        from tests.knowledge.corpus_build import Babbler

        self.base = base
        self.babbler = Babbler(seed=23)
        self.documents = 0
        self.insert_s = 0.0
        self.chunks = 0

    def grow_to(self, total: int, present: int) -> None:
        import random

        from django.db import connection, transaction

        from files.models import StoredFile
        from knowledge import fulltext
        from knowledge.models import Chunk, Document

        chooser = random.Random(self.documents)
        wanted = total - present
        while wanted > 0:
            count = min(BATCH, wanted)
            rows: list[tuple[int, str, str]] = []  # (document index, heading, text)
            docs_needed = (count + CHUNKS_PER_DOCUMENT - 1) // CHUNKS_PER_DOCUMENT
            for i in range(count):
                cjk = chooser.random() < CJK_SHARE
                text = (
                    self.babbler.cjk(FILLER_CHUNK_CHARS // 2)
                    if cjk
                    else self.babbler.english(FILLER_CHUNK_CHARS)
                )
                rows.append((i // CHUNKS_PER_DOCUMENT, f"Filler {self.documents + i // 100}", text))
            if wanted - count == 0:  # the last chunk of the level: a word to find it by
                last = rows[-1]
                rows[-1] = (last[0], last[1], last[2] + f" zqxmarker{total}")
            started = time.perf_counter()
            with transaction.atomic():
                files = StoredFile.objects.bulk_create(
                    StoredFile(
                        owner=self.base.owner,
                        name=f"filler-{self.documents + d}.md",
                        kind=StoredFile.Kind.TEXT,
                        content_type="text/markdown",
                        size=0,
                        sha256="",
                        blob="",
                    )
                    for d in range(docs_needed)
                )
                documents = Document.objects.bulk_create(
                    Document(
                        base=self.base,
                        file=file,
                        name=file.name,
                        status=Document.Status.READY,
                        chunk_count=CHUNKS_PER_DOCUMENT,
                    )
                    for file in files
                )
                chunks = Chunk.objects.bulk_create(
                    (
                        Chunk(document=documents[d], position=n, heading=heading, text=text)
                        for n, (d, heading, text) in enumerate(rows)
                    ),
                    batch_size=500,
                )
                if connection.vendor == "postgresql":
                    fulltext.write_postgres(chunks)  # what knowledge.indexing calls
            self.insert_s += time.perf_counter() - started
            self.documents += docs_needed
            self.chunks += count
            wanted -= count


def database_size() -> int:
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            return cursor.fetchone()[0]
    path = Path(connection.settings_dict["NAME"])
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def latency(user: Any, base: Any, names: dict[int, str], repeats: int) -> dict[str, Any]:
    from tests.knowledge import quality
    from tests.knowledge.corpus_build import questions

    asked = questions()
    quality.evaluate(user, base.pk, names, "fulltext", asked)  # warm-up
    times: dict[str, list[float]] = {"all": [], "en": [], "cjk": []}
    result = None
    for _ in range(repeats):
        result = quality.evaluate(user, base.pk, names, "fulltext", asked)
        for outcome in result.outcomes:
            ms = outcome.seconds * 1000
            times["all"].append(ms)
            times["en" if outcome.question.lang == "en" else "cjk"].append(ms)
    assert result is not None
    figures = {
        group: {"p50": pct(values, 50), "p95": pct(values, 95), "n": len(values)}
        for group, values in times.items()
    }
    figures["recall"] = result.recall
    figures["mrr"] = result.mrr
    figures["recall_en"] = result.subset(lang="en").recall
    return figures


def child(database: str, levels: list[int], docs: int, pages: int, repeats: int) -> None:
    child_django()
    from django.contrib.auth import get_user_model
    from django.db import connection

    from knowledge import retrieval, services
    from knowledge.models import Chunk
    from tests.knowledge import quality

    user = get_user_model().objects.create_user(username="bench", password="bench-pw-123")
    out: dict[str, Any] = {"database": database, "levels": {}}
    out["throughput"] = throughput(user, docs, pages)

    base = services.base_create(user, "Scale")
    names = quality.index_corpus(base)
    filler = Filler(base)
    for level in levels:
        present = Chunk.objects.filter(document__base=base).count()
        filler.grow_to(level, present)
        analyse_s = 0.0
        if connection.vendor == "postgresql":
            started = time.perf_counter()
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE knowledge_chunk")
                cursor.execute("ANALYZE knowledge_document")
            analyse_s = time.perf_counter() - started
        count = Chunk.objects.filter(document__base=base).count()
        marker = retrieval.search(user, [base.pk], f"zqxmarker{level}", k=1)
        assert marker and f"zqxmarker{level}" in marker[0].text, "bulk rows not indexed"
        figures = latency(user, base, names, repeats)
        figures.update(
            chunks=count,
            filler_insert_s=filler.insert_s,
            filler_chunks=filler.chunks,
            analyse_s=analyse_s,
            database_bytes=database_size(),
        )
        out["levels"][str(level)] = figures
        print(
            f"{database} {count} chunks: p50 {figures['all']['p50']:.1f} ms, "
            f"p95 {figures['all']['p95']:.1f} ms (filler inserted at "
            f"{filler.chunks / filler.insert_s:.0f} chunks/s)",
            flush=True,
        )
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--databases",
        default=",".join(DATABASES),
        help="sqlite, postgres, or postgres:CONFIG (AGENTSITE_KNOWLEDGE_SEARCH_CONFIG)",
    )
    parser.add_argument("--levels", default="10000,100000")
    parser.add_argument("--docs", type=int, default=10, help="documents per kind (throughput)")
    parser.add_argument("--pages", type=int, default=20, help="pages per document (throughput)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        database, levels, docs, pages, repeats = args.child
        child(database, [int(x) for x in levels.split(",")], int(docs), int(pages), int(repeats))
        return

    for line in machine():
        log(line)
    log(f"load average {os.getloadavg()}")
    results = {}
    with scratch() as work:
        for database in args.databases.split(","):
            kind, _, config = database.partition(":")
            extra = {"AGENTSITE_KNOWLEDGE_SEARCH_CONFIG": config} if config else {}
            with fresh_database(kind, work) as (url, where):
                log(f"\n== {database}: {where}")
                child_args = [
                    database,
                    args.levels,
                    str(args.docs),
                    str(args.pages),
                    str(args.repeats),
                ]
                results[database] = run_child(SCRIPT, child_args, child_env(work, url, extra))
    log("\nindexing throughput (document_add + index_document)")
    log(
        "| database | kind | pages | pages/s | of which extraction + storing | "
        "chunks/s (indexing) |"
    )
    log("|---|---|---|---|---|---|")
    for database, out in results.items():
        for kind, t in out["throughput"].items():
            share = t["add_s"] / (t["add_s"] + t["index_s"])
            log(
                f"| {database} | {kind} | {t['pages']} ({t['bytes'] / 1e6:.1f} MB) | "
                f"{t['pages_per_s']:.0f} | {share:.0%} | {t['chunks_per_s_indexing']:.0f} |"
            )
    log("\nsearch latency, retrieval.search k=5, 60 questions x repeats (ms)")
    log(
        "| database | chunks | p50 | p95 | English p50 / p95 | Chinese+Japanese p50 / p95 | "
        "recall@5 (English) | database size |"
    )
    log("|---|---|---|---|---|---|---|---|")
    for database, out in results.items():
        for figures in out["levels"].values():
            log(
                f"| {database} | {figures['chunks']:,} | {figures['all']['p50']:.1f} | "
                f"{figures['all']['p95']:.1f} | {figures['en']['p50']:.1f} / "
                f"{figures['en']['p95']:.1f} | {figures['cjk']['p50']:.1f} / "
                f"{figures['cjk']['p95']:.1f} | {figures['recall']:.3f} "
                f"({figures['recall_en']:.3f}) | {figures['database_bytes'] / 1e6:.0f} MB |"
            )
        last = list(out["levels"].values())[-1]
        log(
            f"  {database}: filler bulk-inserted at "
            f"{last['filler_chunks'] / last['filler_insert_s']:.0f} chunks/s"
            + (f", ANALYZE {last['analyse_s']:.1f} s" if last["analyse_s"] else "")
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
