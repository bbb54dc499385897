"""Your files: upload, read their metadata and bytes, delete (:mod:`files.services` does
the work; a file is its owner's only, 404 for anyone else).

An upload streams: the size limit is enforced while the body is read
(:mod:`files.uploads`, put first among the request's upload handlers before the front
door can read the form), and a file over ``FILE_UPLOAD_MAX_MEMORY_SIZE`` goes to a
temporary file, never to memory. A file may also come as the request's whole body, named in its
``Content-Disposition`` header (:mod:`files.raw_uploads`): daphne's HTTP layer parses a
multipart body in memory, a raw one never is, so the site's own pages send files so.
The bytes are served as the artifacts are
(tools/views.py): a sandboxing Content-Security-Policy, ``nosniff``, a download for
everything but images, which are shown inline (chips' previews).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

from csp.constants import NONE
from csp.decorators import csp
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.files.uploadedfile import UploadedFile
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, UnreadablePostError
from django.http.multipartparser import MultiPartParserError
from django.urls import reverse
from django.utils.translation import gettext as _
from ninja import Router, Status
from ninja.decorators import decorate_view

from conversations.api.docs import errors
from conversations.api.params import FileId
from conversations.api.schemas import FileDetail, FileUploaded
from conversations.http.auth import json_error
from core.errors import ApplicationError
from files import raw_uploads, selectors, services, uploads
from files.models import StoredFile

router = Router(tags=["files"])

FILE_POLICY: dict[str, list[str]] = {
    "sandbox": [],  # opaque origin, no script, even if a browser rendered the bytes
    "default-src": [NONE],
    "frame-ancestors": [NONE],
    "base-uri": [NONE],
    "form-action": [NONE],
}
TEXT_CHARSET = "; charset=utf-8"


UPLOAD_BODY = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "properties": {"file": {"type": "string", "format": "binary"}},
                "required": ["file"],
            }
        },
        "application/octet-stream": {
            "schema": {
                "type": "string",
                "format": "binary",
                "description": "The file itself, named in a `Content-Disposition: attachment; "
                'filename="<name>"` header (any Content-Type but a form\'s). Never parsed in '
                "memory: prefer it for large files.",
            }
        },
    },
}
CONTENT_DISPOSITION = {
    "name": "Content-Disposition",
    "in": "header",
    "required": False,
    "description": 'With a raw body: `attachment; filename="report.pdf"` (or RFC 6266\'s '
    "`filename*=UTF-8''...`).",
    "schema": {"type": "string"},
}


def upload_how() -> str:
    """How to send a file, in the language of the request."""
    return _(
        "Send the file as multipart/form-data in the field 'file', or as the request's body "
        "named in a 'Content-Disposition: attachment; filename=\"<name>\"' header."
    )


def streamed_upload(run: Callable[..., Any]) -> Callable[..., Any]:
    """Limit the upload before anything reads the body (the front door reads the form of
    a session request for its CSRF token), and answer a body that is not a readable
    multipart form with the API's 400 rather than Django's page."""

    @functools.wraps(run)
    def limited(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        uploads.limit(request)
        try:
            return run(request, *args, **kwargs)
        except RequestDataTooBig:
            raise  # the API's own 413
        except (MultiPartParserError, SuspiciousOperation, UnreadablePostError) as exc:
            return json_error(
                400,
                _("The upload could not be read (%(error)s). %(how)s")
                % {"error": exc, "how": upload_how()},
                fields={"file": [_("Unreadable upload.")]},
            )

    return limited


def _detail(file: StoredFile) -> dict[str, Any]:
    return {
        "id": file.pk,
        "name": file.name,
        "size": file.size,
        "content_type": file.content_type,
        "kind": file.kind,
        "sha256": file.sha256,
        "pages": len(file.pages or []),
        "text_chars": len(file.text),
        "created_at": file.created_at,
    }


def uploaded_file(request: HttpRequest) -> contextlib.AbstractContextManager[UploadedFile]:
    """The request's file, a multipart field ``file`` or the raw body, refused with the
    API's 400 naming ``file`` when there is neither."""
    if raw_uploads.is_raw(request):
        return raw_uploads.raw_file(request)
    if request.content_type == "multipart/form-data":
        raw_uploads.require_length(request)
        uploaded = request.FILES.get("file")
        if uploaded is not None:
            return contextlib.nullcontext(uploaded)  # Django deletes it with the request
    how = upload_how()
    raise ApplicationError(how, extra={"file": [how]})


@router.post(
    "/files",
    response={201: FileUploaded, **errors(400, 413)},
    operation_id="uploadFile",
    summary="Upload a file (multipart field `file`, or the raw body with its name)",
    description="Text, Markdown, code, CSV, JSON, HTML (UTF-8), PDF, Word (.docx) and "
    "images (PNG, JPEG, WebP, GIF), recognised from the content (not the name or the "
    "Content-Type sent). 413 over `AGENTSITE_FILE_MAX_BYTES` (20 MiB) or your storage "
    "quota; 400 for another type, a password-protected or unreadable document, or a body "
    "that is neither a multipart form with `file` nor a named raw body. Nothing is kept "
    "of a refused upload.",
    url_name="api_files",
    openapi_extra={"requestBody": UPLOAD_BODY, "parameters": [CONTENT_DISPOSITION]},
)
@decorate_view(streamed_upload)
def file_upload(request: HttpRequest, response: HttpResponse):
    with uploaded_file(request) as file:
        stored = services.store(request.user, file)
    response["Location"] = reverse("api_file", args=[stored.pk])
    return Status(
        201,
        {
            "id": stored.pk,
            "name": stored.name,
            "size": stored.size,
            "content_type": stored.content_type,
        },
    )


@router.get(
    "/files/{id:file_id}",
    response={200: FileDetail, **errors(404)},
    operation_id="getFile",
    summary="A file's metadata",
    url_name="api_file",
)
def file_get(request: HttpRequest, file_id: FileId):
    return _detail(selectors.file_get_for_user(request.user, file_id))


@router.get(
    "/files/{id:file_id}/content",
    response={200: None, **errors(404)},
    operation_id="getFileContent",
    summary="A file's bytes (images inline, anything else as a download)",
    url_name="api_file_content",
    openapi_extra={
        "responses": {
            200: {
                "description": "The bytes as uploaded, with the file's content type.",
                "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
            }
        }
    },
)
@decorate_view(csp(FILE_POLICY))  # its answers only: the site's policy stays elsewhere
def file_content(request: HttpRequest, file_id: FileId):
    file = selectors.file_get_for_user(request.user, file_id)
    try:
        handle = file.blob.open("rb")
    except (FileNotFoundError, ValueError):
        raise Http404("the file's bytes are missing") from None
    content_type = file.content_type
    if file.kind == StoredFile.Kind.TEXT:
        content_type += TEXT_CHARSET
    response = FileResponse(
        handle,
        as_attachment=file.kind != StoredFile.Kind.IMAGE,
        filename=file.name,
        content_type=content_type,
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Referrer-Policy"] = "no-referrer"
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    response["Cache-Control"] = "private, no-store"
    return response


@router.delete(
    "/files/{id:file_id}",
    response={204: None, **errors(404, 409)},
    operation_id="deleteFile",
    summary="Delete a file (409 while a message holds it)",
)
def file_delete(request: HttpRequest, file_id: FileId):
    services.delete(selectors.file_get_for_user(request.user, file_id))
    return HttpResponse(status=204)
