"""The Knowledge pages (issue 45): a user's knowledge bases and those shared with them, a
base's documents (upload, add a page by URL, re-index, remove), and the chat header's
control that attaches bases to a conversation.

Thin, like ``views.py``: :mod:`knowledge.services` and :mod:`knowledge.selectors` do the
work, :mod:`conversations.knowledge_sources` fetches a URL (as for the API). Another
user's private base is a 404; a base shared with you shows without forms, and any write
to it is the same 404 (as the API answers). Every form works as a plain POST; htmx and
``static/js/knowledge.js`` swap fragments instead when the browser runs them.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages as flash
from django.core.files.uploadedfile import UploadedFile
from django.db.models import F, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from conversations import knowledge_sources, selectors, services
from core.errors import ApplicationError
from files import raw_uploads, uploads
from knowledge import selectors as knowledge_selectors
from knowledge import services as knowledge_services
from knowledge.models import Document, KnowledgeBase

LIST = "knowledge/list.html"
DETAIL = "knowledge/detail.html"
CHAT = "knowledge/chat_knowledge.html"
# Still to settle: while a document is in one of these, its list polls for news.
UNSETTLED = (Document.Status.QUEUED, Document.Status.INDEXING)
INVALID = 422  # a refused form: never 400, which django-htmx's debug mode turns into a page


# ------------------------------------------------------------------------ the list


@require_http_methods(["GET", "POST"])
def knowledge_list(request: HttpRequest) -> HttpResponse:
    """GET: the user's bases and those shared with them. POST: a new base, then its page
    (a refusal shows the form again with the message by its field, nothing lost)."""
    form = {"name": "", "description": "", "errors": {}}
    if request.method == "POST":
        form["name"] = request.POST.get("name", "")
        form["description"] = request.POST.get("description", "")
        try:
            base = knowledge_services.base_create(
                request.user, form["name"], form["description"].strip()
            )
        except ApplicationError as exc:
            form["errors"] = _field_errors(exc, default="name")
        else:
            flash.success(request, _("Knowledge base “%(name)s” created.") % {"name": base.name})
            return redirect("knowledge_detail", base_id=base.pk)
    bases = list(knowledge_selectors.bases_listed(request.user).prefetch_related("shared_groups"))
    context = {
        "own": [base for base in bases if base.owner_id == request.user.pk],
        "shared": [base for base in bases if base.owner_id != request.user.pk],
        "form": form,
    }
    return render(request, LIST, context, status=INVALID if form["errors"] else 200)


# ----------------------------------------------------------------- a base's page


@require_GET
def knowledge_detail(request: HttpRequest, base_id: int) -> HttpResponse:
    base = knowledge_selectors.base_get_readable(request.user, base_id)
    return _detail_page(request, base)


@require_GET
def knowledge_documents(request: HttpRequest, base_id: int) -> HttpResponse:
    """The documents' list alone: what the page polls while some are still indexing."""
    base = knowledge_selectors.base_get_readable(request.user, base_id)
    return render(request, f"{DETAIL}#documents", _documents_context(request, base))


@require_POST
def knowledge_delete(request: HttpRequest, base_id: int) -> HttpResponse:
    base = _writable(request, base_id)
    name = base.name
    knowledge_services.base_delete(base)
    flash.success(request, _("Knowledge base “%(name)s” deleted.") % {"name": name})
    return redirect("knowledge_list")


@csrf_exempt  # checked below, once the upload limit is in place (Django's documented way)
@require_POST
def knowledge_upload(request: HttpRequest, base_id: int) -> HttpResponse:
    """Files added to a base: each is stored and queued for indexing, or refused with the
    reason beside the upload field. ``static/js/knowledge.js`` sends one file per request
    (so each has the whole size limit) and swaps the answer's fragments in."""
    # Before anything reads the body: the CSRF check reads the form, files and all.
    uploads.limit(request)
    try:
        return _upload(request, base_id)
    except ApplicationError as exc:  # too large: refused while the body streamed in
        base = _writable(request, base_id)
        return _upload_answer(request, base, [exc.message])


@csrf_protect
def _upload(request: HttpRequest, base_id: int) -> HttpResponse:
    base = _writable(request, base_id)
    if raw_uploads.is_raw(request):  # one file as the body: what knowledge.js sends
        with raw_uploads.raw_file(request) as uploaded:
            return _upload_answer(request, base, _added(base, [uploaded]))
    files = request.FILES.getlist("file")
    errors = _added(base, files) if files else [_("Choose one or more files to add.")]
    return _upload_answer(request, base, errors)


def _added(base: KnowledgeBase, files: list[UploadedFile]) -> list[str]:
    """Each file kept and queued for indexing; the refusals, each with its file's name."""
    errors = []
    for uploaded in files:
        try:
            knowledge_services.document_add(base, uploaded)
        except ApplicationError as exc:
            errors.append(
                _("%(name)s: %(reason)s") % {"name": uploaded.name, "reason": exc.message}
            )
    return errors


def _upload_answer(request: HttpRequest, base: KnowledgeBase, errors: list[str]) -> HttpResponse:
    if not request.htmx:
        if errors:
            return _detail_page(request, base, upload_errors=errors, status=INVALID)
        return redirect("knowledge_detail", base_id=base.pk)
    context = _documents_context(request, base) | {"upload_errors": errors}
    html = render_to_string(f"{DETAIL}#documents", context, request)
    html += render_to_string(f"{DETAIL}#upload-errors-oob", context, request)
    return HttpResponse(html, status=INVALID if errors else 200)


@require_POST
def knowledge_add_url(request: HttpRequest, base_id: int) -> HttpResponse:
    """A page fetched now (public addresses only) and added like an upload."""
    base = _writable(request, base_id)
    url = request.POST.get("url", "")
    error = ""
    try:
        knowledge_sources.document_add_from_url(base, url)
    except ApplicationError as exc:
        error = exc.message
    if not request.htmx:
        if error:
            url_form = {"url": url, "error": error}
            return _detail_page(request, base, url_form=url_form, status=INVALID)
        return redirect("knowledge_detail", base_id=base.pk)
    context = _documents_context(request, base) | {
        "url_form": {"url": url if error else "", "error": error}
    }
    html = render_to_string(f"{DETAIL}#url-form", context, request)
    if not error:
        html += render_to_string(f"{DETAIL}#documents", context | {"oob": True}, request)
    return HttpResponse(html, status=INVALID if error else 200)


@require_POST
def knowledge_document_delete(request: HttpRequest, base_id: int, document_id: int) -> HttpResponse:
    base = _writable(request, base_id)
    knowledge_services.document_delete(knowledge_selectors.document_get(base, document_id))
    return _documents_answer(request, base)


@require_POST
def knowledge_document_reindex(
    request: HttpRequest, base_id: int, document_id: int
) -> HttpResponse:
    """Index a document again (one that failed); one still queued or indexing is left as
    it is, so two indexings of it never overlap."""
    base = _writable(request, base_id)
    document = knowledge_selectors.document_get(base, document_id)
    if document.status not in UNSETTLED:
        knowledge_services.document_reindex(document)
    return _documents_answer(request, base)


def _documents_answer(request: HttpRequest, base: KnowledgeBase) -> HttpResponse:
    if not request.htmx:
        return redirect("knowledge_detail", base_id=base.pk)
    return render(request, f"{DETAIL}#documents", _documents_context(request, base))


def _detail_page(
    request: HttpRequest,
    base: KnowledgeBase,
    *,
    upload_errors: list[str] | None = None,
    url_form: dict[str, str] | None = None,
    status: int = 200,
) -> HttpResponse:
    context = _documents_context(request, base) | {
        "upload_errors": upload_errors or [],
        "url_form": url_form or {"url": "", "error": ""},
    }
    return render(request, DETAIL, context, status=status)


def _documents_context(request: HttpRequest, base: KnowledgeBase) -> dict[str, Any]:
    documents = list(_documents(base))
    return {
        "base": base,
        "read_only": base.owner_id != request.user.pk,
        "documents": documents,
        "polling": any(document.status in UNSETTLED for document in documents),
    }


def _documents(base: KnowledgeBase) -> QuerySet[Document]:
    """A base's documents with their file's size (not the file's text, which can be long)."""
    return knowledge_selectors.documents_of(base).annotate(size=F("file__size"))


def _writable(request: HttpRequest, base_id: int) -> KnowledgeBase:
    """The user's own base: a shared one is the 404 any write to it answers (as the API)."""
    try:
        return knowledge_selectors.base_get_writable(request.user, base_id)
    except ApplicationError as exc:
        raise Http404(exc.message) from exc


def _field_errors(exc: ApplicationError, *, default: str) -> dict[str, str]:
    """The message beside the field it is about (the first one ``exc`` names)."""
    field = next(iter(exc.extra), default)
    return {field: exc.message}


# ------------------------------------------------------- the chat header's control


@require_http_methods(["GET", "POST"])
def conversation_knowledge(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """GET: the bases the user may read, those this chat searches checked. POST: attach
    exactly the checked ones (``services.conversation_set_knowledge``); the header's
    chips follow."""
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    error, saved = "", False
    if request.method == "POST":
        try:
            ids = [int(value) for value in request.POST.getlist("knowledge")]
            services.conversation_set_knowledge(
                conversation=conversation, user=request.user, base_ids=ids
            )
        except ValueError:
            error = _("Choose knowledge bases from the list.")
        except ApplicationError as exc:
            error = exc.message
        else:
            saved = True
        if not request.htmx:
            if error:
                flash.error(request, error)
            return redirect("conversation_detail", conversation_id=conversation.pk)
    attached = list(selectors.conversation_knowledge(conversation=conversation, user=request.user))
    readable = list(knowledge_selectors.readable_bases(request.user))
    context = {
        "conversation": conversation,
        "attached": attached,
        "attached_ids": {base.pk for base in attached},
        "own": [base for base in readable if base.owner_id == request.user.pk],
        "shared": [base for base in readable if base.owner_id != request.user.pk],
        "error": error,
        "saved": saved,
    }
    html = render_to_string(f"{CHAT}#picker", context, request)
    if saved:
        html += render_to_string(f"{CHAT}#chips", context | {"oob": True}, request)
    return HttpResponse(html, status=INVALID if error else 200)
