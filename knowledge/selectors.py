"""Reads of knowledge bases. A user reads their own bases and those shared with them (a
group of theirs, or everyone); anything else is the same 404 as an id no row has, so ids
tell nothing about other users' bases."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, QuerySet
from django.http import Http404
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from core.errors import ApplicationError
from knowledge.models import Document, KnowledgeBase

__all__ = [
    "READ_ONLY_MESSAGE",
    "base_get_readable",
    "base_get_writable",
    "document_get",
    "documents_of",
    "readable_bases",
]

READ_ONLY_MESSAGE = gettext_noop(
    "This knowledge base is shared with you read-only: only its owner can change it."
)


def readable_bases(user: Any) -> QuerySet[KnowledgeBase]:
    """The bases ``user`` may read and search: theirs, their groups', everyone's."""
    if not getattr(user, "is_authenticated", False):
        return KnowledgeBase.objects.none()
    shared = Q(shared_with_everyone=True) | Q(shared_groups__in=user.groups.all())
    ids = KnowledgeBase.objects.filter(Q(owner=user) | shared).values("id")
    return KnowledgeBase.objects.filter(id__in=ids).select_related("owner")


def bases_listed(user: Any) -> QuerySet[KnowledgeBase]:
    """:func:`readable_bases` with each one's number of documents."""
    return readable_bases(user).annotate(document_count=Count("documents"))


def base_get_readable(user: Any, base_id: int) -> KnowledgeBase:
    base = readable_bases(user).filter(pk=base_id).first()
    if base is None:
        raise Http404("no such knowledge base")
    return base


def base_get_writable(user: Any, base_id: int) -> KnowledgeBase:
    """The user's own base; a base shared with them is a 404 saying it is read-only."""
    base = base_get_readable(user, base_id)
    if base.owner_id != user.pk:
        raise ApplicationError(_(READ_ONLY_MESSAGE), code="not_found")
    return base


def documents_of(base: KnowledgeBase) -> QuerySet[Document]:
    return base.documents.all()


def document_get(base: KnowledgeBase, document_id: int) -> Document:
    document = base.documents.filter(pk=document_id).first()
    if document is None:
        raise Http404("no such document")
    return document
