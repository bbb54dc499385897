"""The full-text index over chunks, per database.

SQLite: an FTS5 table with external content (``knowledge_chunk`` holds the text once),
kept in step by triggers on insert, update and delete (however chunks go: a document's,
a base's or an account's deletion). Its tokenizer is ``trigram`` (SQLite >= 3.34), so text
without spaces between words (Chinese, Japanese) is found by any 3 characters of it;
shorter terms are matched by ``LIKE`` (:mod:`knowledge.retrieval`).

PostgreSQL: ``knowledge_chunk.search`` (a ``tsvector`` written by indexing, in
``AGENTSITE_KNOWLEDGE_SEARCH_CONFIG``, Chinese and Japanese as two-character pieces:
:mod:`knowledge.cjk`) with a GIN index.

Created by the migration, and again after any ``migrate`` if missing (``IF NOT EXISTS``):
a database built without migrations (the tests') has the tables but not these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.postgres.search import SearchVector
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Value

from knowledge import cjk
from knowledge.models import Chunk

FTS_TABLE = "knowledge_chunk_fts"

SQLITE_CREATE = [
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5("
    "heading, text, content='knowledge_chunk', content_rowid='id', "
    "tokenize='trigram')",
    f"CREATE TRIGGER IF NOT EXISTS knowledge_chunk_ai AFTER INSERT ON knowledge_chunk BEGIN "
    f"INSERT INTO {FTS_TABLE}(rowid, heading, text) VALUES (new.id, new.heading, new.text); END",
    f"CREATE TRIGGER IF NOT EXISTS knowledge_chunk_ad AFTER DELETE ON knowledge_chunk BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, heading, text) "
    "VALUES ('delete', old.id, old.heading, old.text); END",
    f"CREATE TRIGGER IF NOT EXISTS knowledge_chunk_au AFTER UPDATE ON knowledge_chunk BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, heading, text) "
    "VALUES ('delete', old.id, old.heading, old.text); "
    f"INSERT INTO {FTS_TABLE}(rowid, heading, text) VALUES (new.id, new.heading, new.text); END",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS knowledge_chunk_au",
    "DROP TRIGGER IF EXISTS knowledge_chunk_ad",
    "DROP TRIGGER IF EXISTS knowledge_chunk_ai",
    f"DROP TABLE IF EXISTS {FTS_TABLE}",
]
POSTGRES_CREATE = [
    "CREATE INDEX IF NOT EXISTS knowledge_chunk_search_gin ON knowledge_chunk USING gin (search)",
]
POSTGRES_DROP = ["DROP INDEX IF EXISTS knowledge_chunk_search_gin"]


def create(connection: BaseDatabaseWrapper) -> None:
    statements = {"sqlite": SQLITE_CREATE, "postgresql": POSTGRES_CREATE}
    with connection.cursor() as cursor:
        for statement in statements.get(connection.vendor, []):
            cursor.execute(statement)


def drop(connection: BaseDatabaseWrapper) -> None:
    statements = {"sqlite": SQLITE_DROP, "postgresql": POSTGRES_DROP}
    with connection.cursor() as cursor:
        for statement in statements.get(connection.vendor, []):
            cursor.execute(statement)


def ensure_after_migrate(using: str = "default", **kwargs: Any) -> None:
    """post_migrate: the index exists whether the tables came from migrations or not."""
    connection = connections[using]
    if "knowledge_chunk" in connection.introspection.table_names():
        create(connection)


def write_postgres(chunks: Sequence[Chunk]) -> None:
    """Write the chunks' ``tsvector``: one UPDATE for those without Chinese or Japanese,
    and one per chunk with some, whose runs are stored as two-character pieces."""
    config = settings.AGENTSITE_KNOWLEDGE_SEARCH_CONFIG
    segmented = [chunk for chunk in chunks if cjk.has_unspaced(chunk.heading + chunk.text)]
    plain = {chunk.pk for chunk in chunks} - {chunk.pk for chunk in segmented}
    if plain:
        vector = SearchVector("heading", "text", config=config)
        Chunk.objects.filter(pk__in=plain).update(search=vector)
    for chunk in segmented:
        vector = SearchVector(
            Value(cjk.segment(chunk.heading)), Value(cjk.segment(chunk.text)), config=config
        )
        Chunk.objects.filter(pk=chunk.pk).update(search=vector)
