"""Artifact download and preview, for the conversation's owner only (404 for anyone else).

Every artifact response carries its own Content-Security-Policy (django-csp's ``@csp``
replaces the site's policy on these views), at least as strict as the site's in every
directive but one: the preview may be framed by the chat page (``frame-ancestors 'self'``
and ``X-Frame-Options: SAMEORIGIN``, on the preview only). ``sandbox`` gives the document
an opaque origin and runs no script, so even framed (``<iframe sandbox>``) it cannot read
the page, its cookies or the API; ``default-src 'none'`` lets it load nothing but the
stylesheets of a markdown document and ``data:`` images, so it cannot send anything
anywhere either. A tool's HTML keeps its markup but loses its inline styles (no
``'unsafe-inline'``, as on the site).
"""

from __future__ import annotations

from csp.constants import NONE, SELF
from csp.decorators import csp
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_GET

from tools.artifacts import artifact_read_text
from tools.models import Artifact

__all__ = ["artifact_download", "artifact_preview"]

ARTIFACT_POLICY: dict[str, list[str]] = {
    "sandbox": [],  # no allow-* token: opaque origin, no script, forms, popups or navigation
    "default-src": [NONE],
    "style-src": [SELF],  # the stylesheets of a markdown document (artifact_document.html)
    "img-src": ["data:"],
    "frame-ancestors": [NONE],
    "base-uri": [NONE],
    "form-action": [NONE],
}
PREVIEW_POLICY = {**ARTIFACT_POLICY, "frame-ancestors": [SELF]}  # framed by the chat page


def _owned_artifact(request: HttpRequest, artifact_id: int) -> Artifact:
    return get_object_or_404(
        Artifact.objects.select_related("conversation"),
        pk=artifact_id,
        conversation__owner=request.user,
    )


def _harden(response: HttpResponse) -> HttpResponse:
    response["X-Content-Type-Options"] = "nosniff"
    response["Referrer-Policy"] = "no-referrer"
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    response["Cache-Control"] = "private, no-store"
    return response


@require_GET
@login_required
@csp(ARTIFACT_POLICY)
def artifact_download(request: HttpRequest, artifact_id: int) -> HttpResponse:
    artifact = _owned_artifact(request, artifact_id)
    try:
        handle = artifact.file.open("rb")
    except (FileNotFoundError, ValueError):
        raise Http404("artifact file is missing") from None
    response = FileResponse(
        handle,
        as_attachment=True,
        filename=artifact.name.rsplit("/", 1)[-1],
        content_type=artifact.mime_type or "application/octet-stream",
    )
    return _harden(response)


@require_GET
@login_required
@csp(PREVIEW_POLICY)
@xframe_options_sameorigin
def artifact_preview(request: HttpRequest, artifact_id: int) -> HttpResponse:
    """The artifact as a document for a sandboxed iframe (HTML, markdown, text, images)."""
    artifact = _owned_artifact(request, artifact_id)
    kind = artifact.kind
    if kind == "html":
        response = HttpResponse(
            artifact_read_text(artifact), content_type="text/html; charset=utf-8"
        )
    elif kind == "markdown":
        response = render(
            request, "tools/artifact_document.html", {"artifact": artifact, "markdown": True}
        )
    elif artifact.inline_image:
        response = FileResponse(artifact.file.open("rb"), content_type=artifact.mime_type)
    elif kind in ("text", "image"):  # other images (SVG) are shown as source, never rendered
        response = HttpResponse(
            artifact_read_text(artifact, 1024 * 1024), content_type="text/plain; charset=utf-8"
        )
    else:
        raise Http404("no preview for this type of file")
    return _harden(response)
