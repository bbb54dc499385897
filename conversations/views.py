"""HTMX views: thin wrappers over services and selectors.

Full pages on plain requests; named partials (``"page.html#partial"``) for htmx ones.
"""

from __future__ import annotations

import json

from django.contrib import messages as flash
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from audit.services import client_of
from conversations import presets, selectors, services
from conversations.history.tree import Siblings
from conversations.models import AgentMode
from conversations.pages import timeline as page_timeline
from conversations.pages.rendering import RunView, StepItem, composer_frame, render_run_block
from conversations.pages.sidebar import row_context, sidebar_context
from conversations.pages.timeline import logged_run_view
from conversations.runs import lifecycle
from conversations.starting import conversation_start
from core.errors import ApplicationError
from llms.selectors import default_model_for_user, models_for_user
from tools.artifacts import artifacts_for_run

PARTIALS = "conversations/partials.html"
SIDEBAR = "conversations/sidebar.html"
# Going to another chat replaces only the main column: the sidebar (its scroll, its
# search) stays, and the old chat's websocket closes as its element leaves the page.
MAIN_SWAP = {"target": "#main", "select": "#main", "swap": "outerHTML"}
# An event on the page's body: the sidebar reloads its list (a conversation was added).
SIDEBAR_CHANGED = "conversations-changed"


@require_GET
def conversation_list(request: HttpRequest) -> HttpResponse:
    """The home page: a new chat, beside the list of conversations."""
    return _new_chat(request)


@require_http_methods(["GET", "POST"])
def conversation_new(request: HttpRequest) -> HttpResponse:
    """GET: an empty composer (no conversation yet). POST: its first message, which
    creates the conversation; the browser then goes to the conversation's page."""
    if request.method == "GET":
        return _new_chat(request)
    try:
        conversation, _message, _run = conversation_start(
            owner=request.user,
            content=request.POST.get("content", ""),
            model_id=request.POST.get("model") or None,
            mode=request.POST.get("mode", ""),
            file_ids=request.POST.getlist("files"),
            preset_id=request.POST.get("preset") or None,
        )
    except ApplicationError as exc:
        return _form_error(request, exc.message, status=413 if exc.code == "too_large" else 422)
    url = reverse("conversation_detail", args=[conversation.pk])
    if not request.htmx:
        return redirect(url)
    # The run is streaming already: its page's websocket catches up from the event log.
    response = HttpResponse()
    response["HX-Location"] = json.dumps({"path": url, **MAIN_SWAP})
    response["HX-Trigger"] = SIDEBAR_CHANGED
    return response


@require_GET
def conversation_rows(request: HttpRequest) -> HttpResponse:
    """The sidebar's list (a search, the archived view, a refresh) or its next page."""
    context = _sidebar_context(request)
    partial = "#rows" if request.GET.get("cursor") else "#conversation-list"
    return render(request, SIDEBAR + partial, context)


@require_GET
def conversation_detail(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    lifecycle.run_sweep_stale(conversation=conversation)
    chat = page_timeline.conversation_timeline(conversation=conversation)
    context = {
        "conversation": conversation,
        "timeline": chat,
        "models": models_for_user(user=request.user),
        "modes": AgentMode.choices,
        "current_id": conversation.pk,  # highlighted in the sidebar
        "attached": selectors.conversation_knowledge(conversation=conversation, user=request.user),
    }
    return render(request, "conversations/detail.html", context | _sidebar_context(request))


def _new_chat(request: HttpRequest) -> HttpResponse:
    """The empty composer; with ``?preset=<id>``, set up by that preset (its model and
    mode chosen, its starter prompts offered)."""
    preset = None
    if (preset_id := request.GET.get("preset", "")).isdigit():
        preset = presets.preset_get_readable(request.user, int(preset_id))
    default_model = default_model_for_user(user=request.user)
    if preset is not None and preset.model is not None:
        default_model = preset.model
    context = {
        "models": models_for_user(user=request.user),
        "default_model": default_model,
        "modes": AgentMode.choices,
        "preset": preset,
        "new_chat_mode": preset.mode if preset is not None else "",
    }
    return render(request, "conversations/new_chat.html", context | _sidebar_context(request))


def _sidebar_context(request: HttpRequest) -> dict:
    return sidebar_context(request.user, request.GET, request.COOKIES)


@require_POST
def message_post(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    try:
        message, run, injected = services.message_post(
            conversation=conversation,
            user=request.user,
            content=request.POST.get("content", ""),
            file_ids=request.POST.getlist("files"),
        )
    except ApplicationError as exc:
        return _form_error(request, exc.message, status=413 if exc.code == "too_large" else 422)
    if injected:
        item = StepItem(
            kind="inject", text=message.content, dom_id=f"inject-{message.pk}",
            extra={"delivered": False},
        )  # fmt: skip
        # Below the run's answer until the agent takes it in (then it is one of its steps).
        html = render_to_string(
            f"{PARTIALS}#append-followup", {"view": RunView(run_id=run.pk), "item": item}, request
        )
    else:
        view = RunView(run_id=run.pk)
        if not run.is_active:
            view.error = {"message": run.error, "status": run.status}
        # A new run continues the tip of the selected branch: its question has no siblings yet.
        question = Siblings([message.pk], 0)
        html = render_to_string(
            f"{PARTIALS}#user-message", {"message": message, "question": question}, request
        )
        html += render_run_block(view, run, with_next_slot=True) + composer_frame(view)
        if message.seq == 1:  # the first message just titled this conversation instance
            html += render_to_string(
                f"{PARTIALS}#title-input", {"conversation": conversation, "oob": True}, request
            )
    html += render_to_string(f"{PARTIALS}#form-error", {"error": ""}, request)
    return HttpResponse(html)


@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get(user=request.user, run_id=run_id)
    services.run_cancel(run=run)
    return HttpResponse(status=204)


@require_POST
def run_approval(request: HttpRequest, run_id: int, call_id: str) -> HttpResponse:
    """Approve or deny a tool call; answers the card as it now stands."""
    run = selectors.run_get(user=request.user, run_id=run_id)
    decision = request.POST.get("decision", "")
    if decision not in ("approve", "deny"):
        return _form_error(request, _("Choose Approve or Deny."))
    try:
        approval = services.approval_decide(
            run=run,
            call_id=call_id,
            user=request.user,
            approve=decision == "approve",
            client=client_of(request),
        )
    except ApplicationError as exc:
        if exc.code == "not_found":
            raise Http404(exc.message) from exc
        return _form_error(request, exc.message, status=409)
    view = logged_run_view(run.pk)
    item = view.approval_item(call_id)
    if item is None:
        raise Http404(_("There is no such approval request."))
    item.extra["status"] = approval.status
    return render(request, f"{PARTIALS}#approval-item", {"item": item, "view": view})


@require_POST
def message_pin(request: HttpRequest, message_id: int) -> HttpResponse:
    message = selectors.message_get(user=request.user, message_id=message_id)
    pinned = request.POST.get("pinned", "1") not in ("0", "false", "")
    services.message_set_pinned(message=message, pinned=pinned)
    return render(request, f"{PARTIALS}#pin-toggle", {"message": message})


@require_POST
def conversation_rename(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    try:
        services.conversation_rename(conversation=conversation, title=request.POST.get("title", ""))
    except ApplicationError as exc:
        if _from_sidebar(request):
            return _form_error(request, exc.message)
        flash.error(request, exc.message)
    if _from_sidebar(request):
        context = {"conversation": conversation, **row_context(request.user)}
        html = render_to_string(f"{SIDEBAR}#row", context, request)
        if _is_open(request, conversation):  # the chat's header shows the title too
            context = {"conversation": conversation, "oob": True}
            html += render_to_string(f"{PARTIALS}#title-input", context, request)
        return HttpResponse(html)
    return _back(request, conversation)


@require_POST
def conversation_archive(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    archived = request.POST.get("archived", "1") == "1"
    services.conversation_archive(conversation=conversation, archived=archived)
    if _from_sidebar(request):  # the row leaves this view of the list
        if not _is_open(request, conversation):
            return HttpResponse()
        # The open chat's header button says what a click does now.
        return render(
            request, f"{PARTIALS}#archive-form", {"conversation": conversation, "oob": True}
        )
    if archived:
        flash.success(request, _("“%(title)s” archived.") % {"title": conversation})
    else:
        flash.success(request, _("“%(title)s” restored.") % {"title": conversation})
    return redirect("conversation_list")


@require_POST
def conversation_delete(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    title = str(conversation)
    was_open = _is_open(request, conversation)
    services.conversation_delete(conversation=conversation)
    if _from_sidebar(request) and not was_open:
        return HttpResponse()  # the row goes; the open chat stays
    flash.success(request, _("“%(title)s” deleted.") % {"title": title})
    if request.htmx:
        response = HttpResponse()
        response["HX-Redirect"] = reverse("conversation_list")
        return response
    return redirect("conversation_list")


@require_POST
def conversation_model(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    try:
        services.conversation_set_model(
            conversation=conversation, user=request.user, model_id=request.POST.get("model", "")
        )
    except ApplicationError as exc:
        return _form_error(request, exc.message)
    # The demo-model notice follows the conversation's model.
    notice = {"model": conversation.model, "oob": True}
    return HttpResponse(render_to_string("llms/local_model_notice.html", notice, request))


@require_POST
def conversation_mode(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    try:
        services.conversation_set_mode(conversation=conversation, mode=request.POST.get("mode"))
    except ApplicationError as exc:
        return _form_error(request, exc.message)
    return render(request, f"{PARTIALS}#form-error", {"error": ""})


def _from_sidebar(request: HttpRequest) -> bool:
    """A row action of the sidebar: answered with the row, not with a page."""
    return bool(request.htmx) and request.POST.get("next") == "sidebar"


def _is_open(request: HttpRequest, conversation) -> bool:
    """Whether the page that sent this htmx request shows ``conversation``."""
    current = request.htmx.current_url_abs_path if request.htmx else None
    return (current or "").split("?")[0] == reverse("conversation_detail", args=[conversation.pk])


def _back(request: HttpRequest, conversation) -> HttpResponse:
    if request.POST.get("next") == "list":
        return redirect("conversation_list")
    return redirect("conversation_detail", conversation_id=conversation.pk)


@require_GET
def run_summary(request: HttpRequest, run_id: int) -> HttpResponse:
    """The compaction summary a run produced (read from the divider)."""
    run = selectors.run_get(user=request.user, run_id=run_id)
    summary = run.summaries.order_by("-created_at").first()
    text = summary.summary if summary else _("No summary was stored for this run.")
    return render(request, f"{PARTIALS}#summary-text", {"text": text})


@require_GET
def run_artifacts(request: HttpRequest, run_id: int) -> HttpResponse:
    """Previews of the artifacts a tool call of this run produced (loaded by its card)."""
    run = selectors.run_get(user=request.user, run_id=run_id)
    artifacts = artifacts_for_run(run.pk).filter(tool_name=request.GET.get("tool", ""))
    names = request.GET.getlist("name")
    if names:
        artifacts = artifacts.filter(name__in=names)
    return render(request, f"{PARTIALS}#artifact-list", {"artifacts": artifacts})


def _form_error(request: HttpRequest, message: str, *, status: int = 422) -> HttpResponse:
    """An htmx request's refusal: the message under the composer, the page left as it is.

    Never 400 (or 403, 404, 500): in debug mode django-htmx replaces the whole page with
    such a response, to show Django's error page.
    """
    html = render_to_string(f"{PARTIALS}#form-error", {"error": message}, request)
    response = HttpResponse(html, status=status)
    response["HX-Reswap"] = "none"
    return response
