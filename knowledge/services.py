"""Writes of knowledge bases: creating and deleting bases, adding and removing documents.

A document's file is stored as its base owner's :class:`~files.models.StoredFile` (so the
upload's checks and the storage quota apply), and indexed in the background once the
row is committed (:func:`knowledge.indexing.schedule`).
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from core.errors import ApplicationError
from files import services as file_services
from knowledge import indexing
from knowledge.models import Document, KnowledgeBase

__all__ = [
    "base_create",
    "base_delete",
    "document_add",
    "document_delete",
    "document_reindex",
    "documents_reindex",
]

logger = logging.getLogger(__name__)

NAME_MAX_CHARS = 200  # KnowledgeBase.name's column


def base_create(owner: Any, name: str, description: str = "") -> KnowledgeBase:
    name = " ".join((name or "").split())
    if not name:
        raise ApplicationError(
            _("Give the knowledge base a name."), extra={"name": [_("Required.")]}
        )
    if len(name) > NAME_MAX_CHARS:
        message = _("A name is at most %(limit)d characters.") % {"limit": NAME_MAX_CHARS}
        raise ApplicationError(message, extra={"name": [message]})
    return KnowledgeBase.objects.create(owner=owner, name=name, description=description or "")


def document_add(base: KnowledgeBase, uploaded: UploadedFile, *, source_url: str = "") -> Document:
    """Store ``uploaded`` as the base owner's file and queue it for indexing (an
    ``ApplicationError`` from :func:`files.services.store` keeps nothing)."""
    stored = file_services.store(base.owner, uploaded)
    if not stored.text.strip() and stored.kind == stored.Kind.IMAGE:
        file_services.delete(stored)
        message = _("An image has no text to search: upload a document (text, PDF, Word, HTML).")
        raise ApplicationError(message, extra={"file": [message]})
    try:
        with transaction.atomic():
            document = Document.objects.create(
                base=base, file=stored, name=stored.name, source_url=source_url
            )
            transaction.on_commit(lambda: indexing.schedule(document.pk))
    except BaseException:
        file_services.delete(stored)
        raise
    logger.info("document %s added to knowledge base %s", document.pk, base.pk)
    return document


def document_reindex(document: Document) -> None:
    """Queue the document again (after a failure, or a change of the chunking settings)."""
    Document.objects.filter(pk=document.pk).update(
        status=Document.Status.QUEUED, error="", queued_at=timezone.now(), attempts=0
    )
    transaction.on_commit(lambda: indexing.schedule(document.pk))


def documents_reindex(documents: QuerySet[Document]) -> int:
    """Queue these documents again (an embedding model enabled or changed since they were
    indexed: their new vectors come from the current one); how many."""
    ids = list(documents.exclude(status=Document.Status.INDEXING).values_list("pk", flat=True))
    for document in Document.objects.filter(pk__in=ids):
        document_reindex(document)
    return len(ids)


def document_delete(document: Document) -> None:
    """The document, its chunks, and its file unless a message holds that too."""
    file = document.file
    with transaction.atomic():
        document.delete()
        file_services.delete_unattached([file])


def base_delete(base: KnowledgeBase) -> None:
    """The base, its documents and chunks, and their files that nothing else holds."""
    files = [document.file for document in base.documents.select_related("file")]
    with transaction.atomic():
        base.delete()
        file_services.delete_unattached(files)
