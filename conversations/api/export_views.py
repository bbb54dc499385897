"""API views for export, import and shared links (documented in ``schema_sharing``)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.utils.http import content_disposition_header

from conversations import selectors
from conversations.api.views import conversation_detail_out
from conversations.http.auth import api_view
from conversations.http.body import read_body, read_json_object
from conversations.models import SharedLink
from conversations.transfer import exporting, importing, sharing
from core.errors import ApplicationError


def share_out(request: HttpRequest, share: SharedLink) -> dict[str, Any]:
    return {
        "id": share.pk,
        "url": request.build_absolute_uri(sharing.share_url(share)),
        "title": share.title,
        "conversation_id": share.conversation_id,
        "include_artifacts": share.include_artifacts,
        "active": share.is_active,
        "created_at": share.created_at,
        "revoked_at": share.revoked_at,
    }


@api_view("GET")
def conversation_export(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    tree = request.GET.get("tree", "0")
    if tree not in ("0", "1", "true", "false"):
        raise ApplicationError("'tree' must be 0 or 1.", extra={"tree": ["0 or 1"]})
    body, content_type, filename = exporting.export_document(
        conversation=conversation,
        fmt=request.GET.get("format", "json"),
        tree=tree in ("1", "true"),
    )
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response


@api_view("POST")
def conversation_import(request: HttpRequest) -> HttpResponse:
    """The body is an export document (``GET .../export?format=json``)."""
    raw = read_body(request, importing.import_max_bytes())
    conversation = importing.conversation_import(owner=request.user, raw=raw)
    response = JsonResponse(conversation_detail_out(conversation), status=201)
    response["Location"] = reverse("api_conversation", args=[conversation.pk])
    return response


@api_view("POST")
def conversation_shares(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    data = read_json_object(request)
    unknown = sorted(set(data) - {"include_artifacts"})
    if unknown:
        raise ApplicationError(
            f"Unknown field(s): {', '.join(unknown)}.",
            extra={name: ["Unknown field."] for name in unknown},
        )
    include = data.get("include_artifacts", False)
    if not isinstance(include, bool):
        raise ApplicationError(
            "'include_artifacts' must be true or false.",
            extra={"include_artifacts": ["Must be a boolean."]},
        )
    share = sharing.share_create(conversation=conversation, include_artifacts=include)
    return JsonResponse(share_out(request, share), status=201)


@api_view("GET")
def share_list(request: HttpRequest) -> HttpResponse:
    shares = sharing.share_list(user=request.user)
    return JsonResponse({"shares": [share_out(request, share) for share in shares]})


@api_view("GET", "DELETE")
def share_detail(request: HttpRequest, share_id: int) -> HttpResponse:
    share = sharing.share_get(user=request.user, share_id=share_id)
    if request.method == "DELETE":
        sharing.share_revoke(share=share)
        return HttpResponse(status=204)
    return JsonResponse(share_out(request, share))
