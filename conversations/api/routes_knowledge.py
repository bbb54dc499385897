"""Knowledge bases: create, list, delete; add (upload or URL), list and remove their
documents; search them (:mod:`knowledge.services`, :mod:`knowledge.selectors` and
:mod:`knowledge.retrieval` do the work).

Another user's base, document or passage is a 404 like an id no row has. A base shared
with you (a group of yours, or everyone) is readable (list, documents, search) and not
writable: changing it is a 404 whose message says it is read-only, so the answer for a
base you cannot change is the same status whether or not you can see it.

A document from a URL is fetched through the SSRF guard (:mod:`tools.net`) by
:mod:`conversations.knowledge_sources` (the Knowledge pages call it too), and kept as a
file like an upload: HTML as Markdown (as ``web_fetch`` converts it), PDF, Word and text
as they come. Indexing then runs in the background either way.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from ninja import Router, Status
from ninja.decorators import decorate_view
from pydantic import ValidationError

from conversations import knowledge_sources
from conversations.api.docs import errors
from conversations.api.params import DocumentId, KnowledgeBaseId, whole
from conversations.api.routes_files import (
    CONTENT_DISPOSITION,
    UPLOAD_BODY,
    streamed_upload,
    upload_how,
    uploaded_file,
)
from conversations.api.schemas import (
    KnowledgeBaseCreate,
    KnowledgeBaseOut,
    KnowledgeDocumentAdded,
    KnowledgeDocumentFromUrl,
    KnowledgeDocumentOut,
    KnowledgeSearchResults,
)
from conversations.http import body
from core.errors import ApplicationError
from files import raw_uploads
from knowledge import retrieval, selectors, services
from knowledge.models import Document, KnowledgeBase

router = Router(tags=["knowledge"])

MULTIPART = "multipart/form-data"


def _base(base: KnowledgeBase, user: Any, document_count: int | None = None) -> dict[str, Any]:
    count = base.documents.count() if document_count is None else document_count
    return {
        "id": base.pk,
        "name": base.name,
        "description": base.description,
        "owner": base.owner.get_username(),
        "read_only": base.owner_id != user.pk,
        "shared": base.shared_with_everyone or bool(base.shared_groups.all()),
        "document_count": count,
        "created_at": base.created_at,
    }


def _document(document: Document) -> dict[str, Any]:
    return {
        "id": document.pk,
        "name": document.name,
        "status": document.status,
        "error": document.error,
        "source_url": document.source_url,
        "file_id": document.file_id,
        "chunk_count": document.chunk_count,
        "vectors": bool(document.embedded_with),
        "created_at": document.created_at,
        "indexed_at": document.indexed_at,
    }


@router.post(
    "/knowledge",
    response={201: KnowledgeBaseOut, **errors(400)},
    operation_id="createKnowledgeBase",
    summary="Create a knowledge base",
    url_name="api_knowledge",
)
def knowledge_create(request: HttpRequest, payload: KnowledgeBaseCreate):
    base = services.base_create(request.user, payload.name, payload.description)
    return Status(201, _base(base, request.user, 0))


@router.get(
    "/knowledge",
    response={200: list[KnowledgeBaseOut]},
    operation_id="listKnowledgeBases",
    summary="Your knowledge bases and those shared with you (read_only)",
)
def knowledge_list(request: HttpRequest):
    bases = selectors.bases_listed(request.user).prefetch_related("shared_groups")
    return [_base(base, request.user, base.document_count) for base in bases]


@router.delete(
    "/knowledge/{id:base_id}",
    response={204: None, **errors(404)},
    operation_id="deleteKnowledgeBase",
    summary="Delete a knowledge base, its documents and their files",
)
def knowledge_delete(request: HttpRequest, base_id: KnowledgeBaseId):
    services.base_delete(selectors.base_get_writable(request.user, base_id))
    return HttpResponse(status=204)


@router.post(
    "/knowledge/{id:base_id}/documents",
    response={201: KnowledgeDocumentAdded, **errors(400, 404, 413)},
    operation_id="addKnowledgeDocument",
    summary="Add a document: upload it (multipart field `file`, or the raw body with its "
    "name) or give a URL (JSON `{url}`)",
    description="The file is kept as one of your files (the upload limits and your storage "
    "quota apply) and indexed in the background: `status` starts `queued`; list the "
    "documents to see it become `ready` (or `failed`, with `error`). A URL is fetched "
    "once, now (public addresses only); an HTML page is kept as Markdown.",
    openapi_extra={
        "requestBody": {
            **UPLOAD_BODY,
            "content": {
                **UPLOAD_BODY["content"],
                "application/json": {
                    "schema": {"$ref": "#/components/schemas/KnowledgeDocumentFromUrl"}
                },
            },
        },
        "parameters": [CONTENT_DISPOSITION],
    },
)
@decorate_view(streamed_upload)
def knowledge_document_add(request: HttpRequest, base_id: KnowledgeBaseId):
    base = selectors.base_get_writable(request.user, base_id)
    if request.content_type == MULTIPART or raw_uploads.is_raw(request):
        with uploaded_file(request) as uploaded:
            document = services.document_add(base, uploaded)
    else:
        try:
            payload = KnowledgeDocumentFromUrl.model_validate(body.read_json_object(request))
        except ValidationError:
            message = _('Send JSON {"url": ...} to add a page. %(how)s') % {"how": upload_how()}
            raise ApplicationError(message, extra={"url": [message]}) from None
        document = knowledge_sources.document_add_from_url(base, payload.url)
    return Status(201, {"id": document.pk, "name": document.name, "status": document.status})


@router.get(
    "/knowledge/{id:base_id}/documents",
    response={200: list[KnowledgeDocumentOut], **errors(404)},
    operation_id="listKnowledgeDocuments",
    summary="A knowledge base's documents, each with its indexing status",
)
def knowledge_documents(request: HttpRequest, base_id: KnowledgeBaseId):
    base = selectors.base_get_readable(request.user, base_id)
    return [_document(document) for document in selectors.documents_of(base)]


@router.delete(
    "/knowledge/{id:base_id}/documents/{id:document_id}",
    response={204: None, **errors(404)},
    operation_id="deleteKnowledgeDocument",
    summary="Remove a document (its file too, unless a message holds it)",
)
def knowledge_document_delete(
    request: HttpRequest, base_id: KnowledgeBaseId, document_id: DocumentId
):
    base = selectors.base_get_writable(request.user, base_id)
    services.document_delete(selectors.document_get(base, document_id))
    return HttpResponse(status=204)


@router.get(
    "/knowledge/{id:base_id}/search",
    response={200: KnowledgeSearchResults, **errors(400, 404)},
    operation_id="searchKnowledgeBase",
    summary="Search a knowledge base's ready documents (full-text, best first)",
)
def knowledge_search(
    request: HttpRequest,
    base_id: KnowledgeBaseId,
    q: str = "",
    k: whole("k", default=retrieval.DEFAULT_K, minimum=1, maximum=retrieval.MAX_K) = (
        retrieval.DEFAULT_K
    ),
):
    base = selectors.base_get_readable(request.user, base_id)
    hits = retrieval.search(request.user, [base.pk], q, k)
    return {"query": q, "results": [hit.__dict__ for hit in hits]}
