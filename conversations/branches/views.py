"""HTMX views for a conversation's branches: edit a question, regenerate or retry an
answer, continue a paused run, switch between alternatives. Each change answers with the
chat's whole timeline (the branch shown changes), which replaces the page's
``#messages``."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import reswap

from conversations import selectors
from conversations.branches import branching, resuming
from conversations.history.tree import RunTree
from conversations.models import Conversation, Message
from conversations.pages import timeline as page_timeline
from conversations.pages.rendering import composer_frame
from core.errors import ApplicationError
from llms.selectors import models_for_user

PARTIALS = "conversations/partials.html"


def _timeline(request: HttpRequest, conversation: Conversation, fresh_run_id=None) -> HttpResponse:
    chat = page_timeline.conversation_timeline(conversation=conversation, fresh_run_id=fresh_run_id)
    html = render_to_string(f"{PARTIALS}#timeline", {"timeline": chat}, request)
    if chat["active_view"] is not None:  # the run just started: the composer's Stop is its
        html += composer_frame(chat["active_view"])
    html += render_to_string(f"{PARTIALS}#form-error", {"error": ""}, request)
    return HttpResponse(html)


def _refused(request: HttpRequest, exc: ApplicationError) -> HttpResponse:
    status = {"too_large": 413, "conflict": 409, "quota": 429}.get(exc.code or "", 422)
    html = render_to_string(f"{PARTIALS}#form-error", {"error": exc.message}, request)
    # Only the error shows: the timeline the request would have replaced stays.
    return reswap(HttpResponse(html, status=status), "none")


def _question_context(message: Message) -> dict:
    tree = RunTree.load(message.conversation_id)
    run = tree.answer_for_question(message.pk)
    return {
        "message": message,
        "question": tree.question_siblings(run.run_id) if run is not None else None,
    }


@require_GET
def message_show(request: HttpRequest, message_id: int) -> HttpResponse:
    """The message as the timeline shows it (what Cancel on its edit form brings back)."""
    message = selectors.message_get(user=request.user, message_id=message_id)
    return render(request, f"{PARTIALS}#user-message", _question_context(message))


@require_http_methods(["GET", "POST"])
def message_edit(request: HttpRequest, message_id: int) -> HttpResponse:
    """GET: the edit form in the message's place; POST: ask the edited question."""
    message = selectors.message_get(user=request.user, message_id=message_id)
    if request.method == "GET":
        return render(request, f"{PARTIALS}#message-edit", {"message": message})
    try:
        _edited, run = branching.message_edit(
            message=message, user=request.user, content=request.POST.get("content", "")
        )
    except ApplicationError as exc:
        return _refused(request, exc)
    return _timeline(request, message.conversation, fresh_run_id=run.pk)


@require_POST
def message_select(request: HttpRequest, message_id: int) -> HttpResponse:
    message = selectors.message_get(user=request.user, message_id=message_id)
    try:
        branching.branch_select_question(message=message)
    except ApplicationError as exc:
        return _refused(request, exc)
    return _timeline(request, message.conversation)


@require_POST
def run_select(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get(user=request.user, run_id=run_id)
    try:
        branching.branch_select_run(run=run)
    except ApplicationError as exc:
        return _refused(request, exc)
    return _timeline(request, run.conversation)


@require_http_methods(["GET", "POST"])
def run_regenerate(request: HttpRequest, run_id: int) -> HttpResponse:
    """GET: the models the answer may be regenerated with; POST: a new answer (with the
    ``model`` posted, else the conversation's)."""
    run = selectors.run_get(user=request.user, run_id=run_id)
    if request.method == "GET":
        context = {"run": run, "models": models_for_user(user=request.user)}
        return render(request, f"{PARTIALS}#regenerate-models", context)
    try:
        new_run = branching.run_regenerate(
            run=run, user=request.user, model_id=request.POST.get("model") or None
        )
    except ApplicationError as exc:
        return _refused(request, exc)
    return _timeline(request, run.conversation, fresh_run_id=new_run.pk)


@require_POST
def run_retry(request: HttpRequest, run_id: int) -> HttpResponse:
    """Answer a failed, stopped or incomplete run's question again, beside it."""
    run = selectors.run_get(user=request.user, run_id=run_id)
    try:
        retry = branching.run_retry(run=run, user=request.user)
    except ApplicationError as exc:
        return _refused(request, exc)
    return _timeline(request, run.conversation, fresh_run_id=retry.pk)


@require_POST
def run_resume(request: HttpRequest, run_id: int) -> HttpResponse:
    """Continue a paused run with the note posted (``content``, optional), as its
    continuation; a refusal leaves the page, and the note typed, as they were."""
    run = selectors.run_get(user=request.user, run_id=run_id)
    try:
        resumed = resuming.run_resume(
            run=run, user=request.user, content=request.POST.get("content", "")
        )
    except ApplicationError as exc:
        return _refused(request, exc)
    return _timeline(request, run.conversation, fresh_run_id=resumed.pk)
