"""Page views for export, import and shared links; the public shared page.

Thin: :mod:`conversations.transfer.exporting` and :mod:`conversations.transfer.sharing` do
the work. The public views (a shared page, its copied artifacts, attached files and cited
passages) need no login and read nothing but the link's row; they are not indexable and
send no referrer (the token is in the URL).
"""

from __future__ import annotations

from csp.decorators import csp
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_GET, require_POST

from audit.services import client_of
from conversations import selectors
from conversations.transfer import exporting, importing, sharing
from core.errors import ApplicationError
from files.models import StoredFile
from tools.views import ARTIFACT_POLICY, PREVIEW_POLICY

NOINDEX = "noindex, nofollow"


# --------------------------------------------------------------------- downloads


def export_response(conversation, *, fmt: str, tree: bool, request=None) -> HttpResponse:
    """The export as a download (the page's and the API's)."""
    body, content_type, filename = exporting.export_document(
        conversation=conversation,
        fmt=fmt,
        tree=tree,
        actor=getattr(request, "user", None),
        client=client_of(request),
    )
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, filename)
    response["Cache-Control"] = "private, no-store"
    return response


@require_GET
def conversation_export(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    fmt = request.GET.get("format", "markdown")
    tree = request.GET.get("tree") in ("1", "true")
    try:
        return export_response(conversation, fmt=fmt, tree=tree, request=request)
    except ApplicationError as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain; charset=utf-8")


@require_POST
def conversation_import(request: HttpRequest) -> HttpResponse:
    """A JSON export file becomes a new conversation of the user (or nothing, and why)."""
    upload = request.FILES.get("file")
    if upload is None:
        flash.error(request, _("Choose a JSON export file to import."))
        return redirect("conversation_list")
    try:  # never more than the limit and a byte is read: the service refuses it
        raw = upload.read(importing.import_max_bytes() + 1)
        conversation = importing.conversation_import(
            owner=request.user, raw=raw, client=client_of(request)
        )
    except ApplicationError as exc:
        flash.error(request, _("Nothing was imported: %(reason)s") % {"reason": exc.message})
        return redirect("conversation_list")
    flash.success(request, _("Imported “%(title)s”.") % {"title": conversation})
    return redirect("conversation_detail", conversation_id=conversation.pk)


# ------------------------------------------------------------------ shared links


@require_POST
def conversation_share(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    share = sharing.share_create(
        conversation=conversation,
        include_artifacts=request.POST.get("include_artifacts") in ("1", "on", "true"),
        include_files=request.POST.get("include_files") in ("1", "on", "true"),
        client=client_of(request),
    )
    flash.success(request, _("Shared link created for “%(title)s”.") % {"title": share})
    return redirect(reverse("share_list") + f"#share-{share.pk}")


@require_GET
def share_list(request: HttpRequest) -> HttpResponse:
    shares = [
        (share, request.build_absolute_uri(sharing.share_url(share)))
        for share in sharing.share_list(user=request.user)
    ]
    return render(request, "conversations/shares.html", {"shares": shares})


@require_POST
def share_revoke(request: HttpRequest, share_id: int) -> HttpResponse:
    share = sharing.share_revoke(
        share=sharing.share_get(user=request.user, share_id=share_id),
        actor=request.user,
        client=client_of(request),
    )
    flash.success(
        request,
        _("The link to “%(title)s” is revoked: it now answers “not found”.") % {"title": share},
    )
    return redirect("share_list")


# --------------------------------------------------------------------- public


def _public(response: HttpResponse) -> HttpResponse:
    response["X-Robots-Tag"] = NOINDEX
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "no-store"
    return response


@require_GET
@login_not_required
def shared_page(request: HttpRequest, token: str) -> HttpResponse:
    share = sharing.share_public(token=token)
    context = {**sharing.snapshot_page(share), "token": token}
    return _public(render(request, "conversations/shared.html", context))


@require_GET
@login_not_required
@csp(PREVIEW_POLICY)
@xframe_options_sameorigin
def shared_artifact_preview(request: HttpRequest, token: str, index: int) -> HttpResponse:
    """A copied artifact for the shared page's sandboxed frame or image (as
    tools.views.artifact_preview serves the owner's)."""
    entry, data = sharing.snapshot_artifact(sharing.share_public(token=token), index)
    kind = entry.get("kind")
    if kind == "html":
        content_type = "text/html; charset=utf-8"
    elif entry.get("inline_image"):
        content_type = entry.get("mime_type") or "application/octet-stream"
    else:  # text, markdown, SVG and other images: shown as source, never rendered
        content_type = "text/plain; charset=utf-8"
    response = HttpResponse(data, content_type=content_type)
    response["X-Content-Type-Options"] = "nosniff"
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    return _public(response)


@require_GET
@login_not_required
@csp(ARTIFACT_POLICY)
def shared_artifact_download(request: HttpRequest, token: str, index: int) -> HttpResponse:
    entry, data = sharing.snapshot_artifact(sharing.share_public(token=token), index)
    response = HttpResponse(data, content_type=entry.get("mime_type") or "application/octet-stream")
    filename = str(entry.get("name", "artifact")).rsplit("/", 1)[-1] or "artifact"
    response["Content-Disposition"] = content_disposition_header(True, filename)
    response["X-Content-Type-Options"] = "nosniff"
    return _public(response)


@require_GET
@login_not_required
@csp(ARTIFACT_POLICY)
def shared_file(request: HttpRequest, token: str, index: int) -> HttpResponse:
    """A copied attached file: an image inline (the chip's preview), anything else as a
    download, as the owner's own files are served (conversations/api/routes_files.py)."""
    entry, data = sharing.snapshot_file(sharing.share_public(token=token), index)
    image = entry.get("kind") == StoredFile.Kind.IMAGE
    content_type = entry.get("content_type") or "application/octet-stream"
    if entry.get("kind") == StoredFile.Kind.TEXT:
        content_type += "; charset=utf-8"
    response = HttpResponse(data, content_type=content_type)
    filename = str(entry.get("name", "file")).rsplit("/", 1)[-1] or "file"
    response["Content-Disposition"] = content_disposition_header(not image, filename)
    response["X-Content-Type-Options"] = "nosniff"
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    return _public(response)


@require_GET
@login_not_required
def shared_passage(request: HttpRequest, token: str, index: int) -> HttpResponse:
    """A passage an answer cites, as copied when the link was made (the knowledge base's
    own page is its readers' only, and may have changed since)."""
    share = sharing.share_public(token=token)
    context = {
        "passage": sharing.snapshot_passage(share, index),
        "title": (share.snapshot or {}).get("title", ""),
        "token": token,
    }
    return _public(render(request, "conversations/shared_passage.html", context))
