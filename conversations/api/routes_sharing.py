"""Export, import and shared links."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.http import content_disposition_header
from ninja import Router, Status

from audit.services import client_of
from conversations import selectors
from conversations.api.docs import errors
from conversations.api.outputs import conversation_detail_out, share_out
from conversations.api.params import ConversationId, ExportFormat, ShareId, Tree
from conversations.api.schemas import (
    ConversationDetail,
    ExportDocument,
    Share,
    ShareList,
    ShareNewBody,
)
from conversations.http.body import read_body
from conversations.transfer import exporting, importing, sharing

router = Router(tags=["sharing"])

_SCHEMA = "#/components/schemas/"


@router.get(
    "/conversations/{id:conversation_id}/export",
    response={200: ExportDocument, **errors(400, 404)},
    operation_id="exportConversation",
    summary="Export a conversation as Markdown or JSON (a download)",
    description="Markdown: the selected branch (questions, tool calls, answers as their "
    "markdown source). JSON: the selected branch, or every branch with `tree=1`; "
    "`POST /api/conversations/import` reads it back.",
    url_name="api_conversation_export",
    openapi_extra={
        "responses": {
            200: {
                "description": "The file (Content-Disposition: attachment).",
                "content": {"text/markdown": {"schema": {"type": "string"}}},
            }
        }
    },
)
def conversation_export(
    request: HttpRequest,
    conversation_id: ConversationId,
    format: ExportFormat = "json",
    tree: Tree = "0",
):
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    body, content_type, filename = exporting.export_document(
        conversation=conversation,
        fmt=format,
        tree=tree == "1",
        actor=request.user,
        client=client_of(request),
    )
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response


@router.post(
    "/conversations/import",
    response={201: ConversationDetail, **errors(400, 413)},
    operation_id="importConversation",
    summary="Import a JSON export as a new conversation of yours",
    description="The whole file or nothing: an unknown format or version, a broken tree or "
    "a message over the length limit is refused and nothing is saved. Runs come back as "
    "finished records, without their events.",
    url_name="api_conversation_import",
    # The importer reads the file itself: its refusals say what is wrong in the file.
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": _SCHEMA + "ExportDocument"}}},
        }
    },
)
def conversation_import(request: HttpRequest, response: HttpResponse):
    raw = read_body(request, importing.import_max_bytes())
    conversation = importing.conversation_import(
        owner=request.user, raw=raw, client=client_of(request)
    )
    response["Location"] = reverse("api_conversation", args=[conversation.pk])
    return Status(201, conversation_detail_out(conversation))


@router.post(
    "/conversations/{id:conversation_id}/shares",
    response={201: Share, **errors(400, 404, 413)},
    operation_id="createShare",
    summary="Share a read-only snapshot of the selected branch",
    description="The snapshot is copied now: later messages do not appear. The knowledge "
    "passages the answers cite are copied, so their citations open on the share. Artifacts "
    "are copied only with `include_artifacts`, the messages' attached files only with "
    "`include_files`.",
    url_name="api_conversation_shares",
)
def share_create(request: HttpRequest, conversation_id: ConversationId, payload: ShareNewBody):
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    share = sharing.share_create(
        conversation=conversation,
        include_artifacts=payload.include_artifacts,
        include_files=payload.include_files,
        client=client_of(request),
    )
    return Status(201, share_out(request, share))


@router.get(
    "/shares",
    response={200: ShareList, **errors()},
    operation_id="listShares",
    summary="Your shared links, newest first (revoked ones too)",
    url_name="api_shares",
)
def share_list(request: HttpRequest):
    shares = sharing.share_list(user=request.user)
    return {"shares": [share_out(request, share) for share in shares]}


@router.get(
    "/shares/{id:share_id}",
    response={200: Share, **errors(404)},
    operation_id="getShare",
    summary="A shared link",
    url_name="api_share",
)
def share_get(request: HttpRequest, share_id: ShareId):
    return share_out(request, sharing.share_get(user=request.user, share_id=share_id))


@router.delete(
    "/shares/{id:share_id}",
    response={204: None, **errors(404)},
    operation_id="revokeShare",
    summary="Revoke a shared link (its page answers 404 from now on)",
)
def share_revoke(request: HttpRequest, share_id: ShareId):
    sharing.share_revoke(
        share=sharing.share_get(user=request.user, share_id=share_id),
        actor=request.user,
        client=client_of(request),
    )
    return HttpResponse(status=204)
