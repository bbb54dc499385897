"""Chunks' vectors, stored and searched by the database: sqlite-vec on SQLite, pgvector on
PostgreSQL. Optional: used only when an admin enabled an embedding model
(:class:`llms.models.EmbeddingModel`) and the database can hold vectors.

One table per vector length, ``knowledge_chunk_vec<N>``, created when the first vectors of
that length are written; tables of other lengths are dropped then (their vectors came
from a model that is no longer enabled). A chunk's vector goes with the chunk: a foreign
key with ``ON DELETE CASCADE`` on PostgreSQL, a delete trigger on SQLite (virtual tables
have no foreign keys).

- SQLite: a ``vec0`` virtual table (rowid = chunk id); the extension is loaded into each
  new connection (:func:`load_sqlite_extension`, connected in the app's ``ready``) where
  Python's ``sqlite3`` allows extensions (Debian's does; a Python built without
  ``--enable-loadable-sqlite-extensions`` does not, and then vectors are off).
- PostgreSQL: ``vector(N)`` with an HNSW index (cosine) for up to 2,000 dimensions, the
  extension created if missing (``CREATE EXTENSION vector`` needs a superuser once, or the
  extension installed beforehand).

Searches are exact within the user's scope: the distance (cosine) of each chunk the user
may read, computed by the database (``vec_distance_cosine`` / ``<=>``), best first.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from django.db import DatabaseError, connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import QuerySet
from django.utils.translation import gettext as _

__all__ = [
    "available",
    "load_sqlite_extension",
    "prepare",
    "search",
    "store",
    "unavailable_reason",
]

logger = logging.getLogger(__name__)

TABLE_PREFIX = "knowledge_chunk_vec"
HNSW_MAX_DIMENSIONS = 2000  # pgvector's limit for an HNSW index on vector


def _table(dimensions: int) -> str:
    return f"{TABLE_PREFIX}{int(dimensions)}"


def load_sqlite_extension(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """``connection_created``: load sqlite-vec into a new SQLite connection, if it can be."""
    if connection.vendor != "sqlite":
        return
    raw = connection.connection
    if not hasattr(raw, "enable_load_extension"):
        return  # this Python's sqlite3 was built without extension loading
    try:
        import sqlite_vec
    except ImportError:
        return
    raw.enable_load_extension(True)
    try:
        sqlite_vec.load(raw)
    except Exception as exc:  # sqlite3.OperationalError: a wrong build for this machine
        logger.warning("sqlite-vec could not be loaded: %s", exc)
    finally:
        raw.enable_load_extension(False)


def unavailable_reason() -> str | None:
    """Why this database cannot hold vectors now, or None when it can."""
    if connection.vendor == "sqlite":
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT vec_version()")
        except DatabaseError:
            return _(
                "SQLite cannot load the sqlite-vec extension here (this Python's sqlite3 "
                "was built without extension loading, or sqlite-vec is not installed)."
            )
        return None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
            if cursor.fetchone() is None:
                return _("PostgreSQL has no pgvector extension (package postgresql-NN-pgvector).")
        return None
    return _("%(database)s holds no vectors.") % {"database": connection.vendor}


def available() -> bool:
    return unavailable_reason() is None


def _existing_tables() -> list[str]:
    return [
        name
        for name in connection.introspection.table_names(include_views=False)
        if name.startswith(TABLE_PREFIX) and name[len(TABLE_PREFIX) :].isdigit()
    ]


def prepare(dimensions: int) -> None:
    """Make sure vectors of this length have their table (dropping those of another),
    before a transaction writes them: a refusal (``CREATE EXTENSION`` without the right,
    say) is then a ``DatabaseError`` the caller can report, not a failed transaction."""
    if _table(dimensions) not in _existing_tables():
        _create(dimensions)


def _create(dimensions: int) -> None:
    table = _table(dimensions)
    with connection.cursor() as cursor:
        for other in _existing_tables():
            if other != table:
                _drop(cursor, other)
        if connection.vendor == "sqlite":
            cursor.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING vec0("
                f"embedding float[{int(dimensions)}] distance_metric=cosine)"
            )
            cursor.execute(
                f"CREATE TRIGGER IF NOT EXISTS {table}_ad AFTER DELETE ON knowledge_chunk "
                f"BEGIN DELETE FROM {table} WHERE rowid = old.id; END"
            )
            return
        with transaction.atomic():  # a savepoint: a refused CREATE EXTENSION stays local
            cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {table} ("
            "chunk_id bigint PRIMARY KEY REFERENCES knowledge_chunk(id) ON DELETE CASCADE, "
            f"embedding vector({int(dimensions)}) NOT NULL)"
        )
        if dimensions <= HNSW_MAX_DIMENSIONS:
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table} "
                "USING hnsw (embedding vector_cosine_ops)"
            )


def _drop(cursor: Any, table: str) -> None:
    if connection.vendor == "sqlite":
        cursor.execute(f"DROP TRIGGER IF EXISTS {table}_ad")
    cursor.execute(f"DROP TABLE IF EXISTS {table}")


def _literal(vector: Sequence[float]) -> str:
    """The text form both extensions read: ``[0.1,0.2,...]``."""
    return json.dumps([float(value) for value in vector], separators=(",", ":"))


def store(rows: Sequence[tuple[int, Sequence[float]]]) -> None:
    """Write ``(chunk id, vector)`` rows (all of one length, whose table :func:`prepare`
    made), replacing a chunk's old one."""
    if not rows:
        return
    table = _table(len(rows[0][1]))
    ids = [chunk_id for chunk_id, _vector in rows]
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            placeholders = ",".join(["%s"] * len(ids))
            cursor.execute(f"DELETE FROM {table} WHERE rowid IN ({placeholders})", ids)
            cursor.executemany(
                f"INSERT INTO {table}(rowid, embedding) VALUES (%s, %s)",
                [(chunk_id, _literal(vector)) for chunk_id, vector in rows],
            )
        else:
            cursor.executemany(
                f"INSERT INTO {table} (chunk_id, embedding) VALUES (%s, %s::vector) "
                "ON CONFLICT (chunk_id) DO UPDATE SET embedding = EXCLUDED.embedding",
                [(chunk_id, _literal(vector)) for chunk_id, vector in rows],
            )


def search(scope: QuerySet, vector: Sequence[float], k: int) -> list[tuple[int, float]]:
    """The ``k`` chunks of ``scope`` (a queryset of chunks) nearest ``vector``:
    ``[(chunk id, similarity)]``, best first (similarity = 1 - cosine distance)."""
    table = _table(len(vector))
    if not any(vector) or table not in _existing_tables():
        return []  # a zero vector has no direction: nothing is near it
    scope_sql, scope_params = scope.values("id").query.sql_with_params()
    if connection.vendor == "sqlite":
        sql = (
            "SELECT id, distance FROM (SELECT rowid AS id, "
            f"vec_distance_cosine(embedding, vec_f32(%s)) AS distance FROM {table} "
            f"WHERE rowid IN ({scope_sql})) WHERE distance IS NOT NULL "
            "ORDER BY distance, id LIMIT %s"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [_literal(vector), *scope_params, k])
            return [(row[0], 1.0 - row[1]) for row in cursor.fetchall()]
    sql = (
        f"SELECT chunk_id, embedding <=> %s::vector AS distance FROM {table} "
        f"WHERE chunk_id IN ({scope_sql}) ORDER BY distance, chunk_id LIMIT %s"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        # With a filter, an HNSW scan could stop short of k rows; keep scanning (pgvector
        # >= 0.8; an unknown setting is a harmless placeholder on older versions).
        cursor.execute("SET LOCAL hnsw.iterative_scan = strict_order")
        cursor.execute(sql, [_literal(vector), *scope_params, k])
        return [(row[0], 1.0 - float(row[1])) for row in cursor.fetchall()]
