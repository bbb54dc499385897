"""Indexing a document in the background: its file's text cut into chunks
(:mod:`knowledge.chunking`) and written where full-text search finds them
(:mod:`knowledge.fulltext`), its status going ``queued`` → ``indexing`` → ``ready``, or
``failed`` with the reason its owner sees.

Where it runs mirrors :func:`conversations.runs.launcher.launch`: a Celery task queued by
name in team mode (:mod:`knowledge.tasks`), the process runtime's loop in embedded mode
(the sync work in a worker thread, so the loop keeps streaming runs). A process with
neither (a management command) fails the document at once, saying so, rather than
leaving it queued forever.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from celery import current_app
from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import RedisError

from core import runtime
from core.errors import ApplicationError
from knowledge import chunking, fulltext, vectors
from knowledge.models import Chunk, Document
from llms.embeddings import EmbeddingError, active_embedder

__all__ = ["INDEX_DOCUMENT_TASK", "index_document", "schedule"]

logger = logging.getLogger(__name__)

# The Celery task (knowledge/tasks.py), queued by name as the run launcher does.
INDEX_DOCUMENT_TASK = "knowledge.index_document"

# Marked with gettext_noop: translated when a document fails with one (the language of
# that moment), the English kept here for comparisons.
NO_RUNTIME = gettext_noop(
    "This document could not be indexed: the process that added it runs no background "
    "work (add it through the web server or the API)."
)
QUEUE_UNREACHABLE = gettext_noop(
    "This document could not be indexed: the task queue is not answering."
)
NO_TEXT = gettext_noop(
    "No text could be read from this document (a scanned PDF holds images of text, which "
    "are not read)."
)
UNEXPECTED = gettext_noop(
    "Indexing failed unexpectedly; try again, or ask an administrator to look at the log."
)

Status = Document.Status


def _fail(document_id: int, reason: str) -> None:
    """Fail the document with ``reason`` (already translated)."""
    Document.objects.filter(pk=document_id).update(status=Status.FAILED, error=reason)


def _full_text_only(reason: object) -> str:
    return _("Found by full-text search only, without vectors: %(reason)s") % {"reason": reason}


def schedule(document_id: int) -> bool:
    """Index the document in the background (called once its row is committed). False,
    the document failed with the reason, when nothing can run it."""
    if settings.AGENTSITE_EXECUTION == "celery":
        try:
            current_app.send_task(INDEX_DOCUMENT_TASK, args=(document_id,))
        except (BrokerError, RedisError) as exc:
            logger.warning("document %s not queued: %r", document_id, exc)
            _fail(document_id, _(QUEUE_UNREACHABLE))
            return False
        return True
    loop = runtime.primary_or_none()
    if loop is None:
        logger.warning("document %s not indexed: this process has no runtime", document_id)
        _fail(document_id, _(NO_RUNTIME))
        return False
    loop.submit(index_in_thread(document_id))
    return True


async def index_in_thread(document_id: int) -> str:
    """On the runtime's loop: the sync indexing in a worker thread."""
    return await sync_to_async(_index_and_release, thread_sensitive=False)(document_id)


def _index_and_release(document_id: int) -> str:
    try:
        return index_document(document_id)
    finally:
        close_old_connections()  # a pool thread: don't keep a connection past its age


@dataclass(frozen=True)
class Embedded:
    vectors: list[list[float]] | None = None
    signature: str = ""  # of the model that made ``vectors``
    problem: str = ""  # why there are none although a model is enabled, for the owner


def _embed(pieces: list[chunking.Piece]) -> Embedded:
    """The pieces' vectors from the enabled embedding model, if any. Its failure does not
    fail the document: it is still found by full text, and the owner is told."""
    embedder = active_embedder()
    if embedder is None:
        return Embedded()
    reason = vectors.unavailable_reason()
    if reason is not None:
        return Embedded(problem=_full_text_only(reason))
    try:
        found = embedder.embed([_embedding_text(piece) for piece in pieces])
    except EmbeddingError as exc:
        return Embedded(problem=_full_text_only(exc))
    try:
        vectors.prepare(len(found[0]))
    except DatabaseError as exc:
        logger.warning("no table for vectors: %s", exc)
        return Embedded(
            problem=_(
                "Found by full-text search only, without vectors: the database refused to "
                "create the table for vectors (see the log)."
            )
        )
    return Embedded(vectors=found, signature=embedder.signature)


def _embedding_text(piece: chunking.Piece) -> str:
    return f"{piece.heading}\n\n{piece.text}" if piece.heading else piece.text


def index_document(document_id: int) -> str:
    """Index a queued document; its new status. A document not queued any more (deleted,
    or claimed by another worker) is left alone."""
    claimed = Document.objects.filter(pk=document_id, status=Status.QUEUED).update(
        status=Status.INDEXING, error="", claimed_at=timezone.now()
    )
    if not claimed:
        return "skipped"
    try:
        document = Document.objects.select_related("file").get(pk=document_id)
        pieces = chunking.split(
            document.file.text,
            pages=document.file.pages or (),
            size=settings.AGENTSITE_KNOWLEDGE_CHUNK_CHARS,
            overlap=settings.AGENTSITE_KNOWLEDGE_CHUNK_OVERLAP,
        )
        if not pieces:
            raise ApplicationError(_(NO_TEXT))
        embedded = _embed(pieces)
        with transaction.atomic():
            document.chunks.all().delete()
            chunks = Chunk.objects.bulk_create(
                Chunk(
                    document=document,
                    position=n,
                    page=piece.page,
                    heading=piece.heading,
                    text=piece.text,
                )
                for n, piece in enumerate(pieces)
            )
            if connection.vendor == "postgresql":
                fulltext.write_postgres(chunks)
            if embedded.vectors:
                vectors.store([(c.pk, v) for c, v in zip(chunks, embedded.vectors, strict=True)])
            updated = Document.objects.filter(pk=document_id, status=Status.INDEXING).update(
                status=Status.READY,
                chunk_count=len(pieces),
                indexed_at=timezone.now(),
                embedded_with=embedded.signature,
                error=embedded.problem,
            )
            if not updated:  # deleted meanwhile: its chunks go with it
                transaction.set_rollback(True)
                return "skipped"
    except Document.DoesNotExist:
        return "skipped"
    except ApplicationError as exc:
        _fail(document_id, exc.message)
        return Status.FAILED
    except Exception:
        logger.exception("indexing document %s failed", document_id)
        _fail(document_id, _(UNEXPECTED))
        return Status.FAILED
    logger.info("document %s indexed: %d chunks", document_id, len(pieces))
    return Status.READY
