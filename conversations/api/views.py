"""The JSON API (DESIGN.md section 3); the event stream is in :mod:`conversations.live.sse`.

Views are thin: :func:`conversations.http.auth.api_view` authenticates, rate limits and
turns ``ApplicationError``/``Http404`` into JSON; the work is done by the same services
and selectors as the HTMX views, so the API and the browser cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse

from conversations import selectors, services
from conversations.branches import branching, resuming
from conversations.history.numbering import last_event_seq
from conversations.history.tree import RunTree
from conversations.http.auth import api_view, json_error
from conversations.http.body import read_json_object
from conversations.http.params import DB_ID_MAX, whole_number
from conversations.models import CompactionSummary, Conversation, Message, Run
from conversations.transfer.exporting import message_fields
from core.errors import ApplicationError
from llms.selectors import model_get_for_user, models_for_user
from tools.services import tools_available_for_user

LIST_LIMIT_DEFAULT = 100
LIST_LIMIT_MAX = 500
LIST_OFFSET_MAX = DB_ID_MAX - LIST_LIMIT_MAX  # the page's end must fit a 64-bit OFFSET + LIMIT


# --------------------------------------------------------------------------- input


def _json_body(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object (:mod:`conversations.http.body`: 413, or 400 if bad)."""
    return read_json_object(request)


def _check_fields(data: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ApplicationError(
            f"Unknown field(s): {', '.join(unknown)}.",
            extra={name: ["Unknown field."] for name in unknown},
        )


def _string(data: dict[str, Any], name: str, *, max_chars: int | None = None) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApplicationError(f"'{name}' must be a string.", extra={name: ["Must be a string."]})
    if max_chars is not None and len(value) > max_chars:
        raise ApplicationError(
            f"'{name}' is too long.", extra={name: [f"At most {max_chars} characters."]}
        )
    return value


def _model_for(user, model_id: Any):
    """The model row for a request's ``model`` id; a field error when not allowed."""
    if isinstance(model_id, bool) or not isinstance(model_id, int | str):
        raise ApplicationError("'model' must be a model id.", extra={"model": ["Must be an id."]})
    try:
        return model_get_for_user(user=user, model_id=model_id)
    except ApplicationError as exc:
        raise ApplicationError(exc.message, extra={"model": [exc.message]}) from None


# -------------------------------------------------------------------------- output


def conversation_summary(conversation: Conversation, *, last_seq: int) -> dict[str, Any]:
    model = conversation.model
    return {
        "id": conversation.pk,
        "title": conversation.title,
        "model": _model_ref(model) if model is not None else None,
        "archived": conversation.archived,
        "mode": conversation.mode,
        "created_at": conversation.created_at,
        "updated_at": conversation.updated_at,
        "last_event_seq": last_seq,
        "url": reverse("api_conversation", args=[conversation.pk]),
        "events_url": reverse("api_conversation_events", args=[conversation.pk]),
    }


def _model_ref(model) -> dict[str, Any]:
    return {"id": model.pk, "name": str(model)}


def message_out(message: Message) -> dict[str, Any]:
    return {
        **message_fields(message),
        "run_id": message.run_id,
        "delivered_at": message.delivered_at,
        "created_at": message.created_at,
    }


def run_out(run: Run) -> dict[str, Any]:
    return {
        "id": run.pk,
        "status": run.status,
        "trigger_message_id": run.trigger_message_id,
        "parent_run_id": run.parent_id,
        "model_id": run.model_id,
        "mode": run.mode or None,
        "iterations": run.iterations,
        "usage": run.usage,
        "elapsed": run.elapsed,
        "error": run.error,
        "cancel_requested": run.cancel_requested,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


def _row_out(row) -> dict[str, Any]:
    """A row of a model this module does not know the shape of (all concrete fields)."""
    out: dict[str, Any] = {}
    for field in row._meta.concrete_fields:
        if field.name == "conversation":
            continue
        name = field.attname if field.is_relation else field.name
        out["id" if field.primary_key else name] = getattr(row, field.attname)
    return out


def conversation_detail_out(
    conversation: Conversation, *, all_branches: bool = False
) -> dict[str, Any]:
    """The conversation with the messages and runs of the branch the user is on (every
    branch with ``all_branches``); each run says where it sits among its alternatives."""
    out = conversation_summary(conversation, last_seq=last_event_seq(conversation.pk))
    tree = RunTree.load(conversation.pk)
    path = {node.run_id for node in tree.selected_path()}
    if all_branches:
        messages = list(conversation.messages.order_by("seq"))
        runs = list(conversation.runs.order_by("created_at", "id"))
    else:
        messages = selectors.branch_messages(conversation=conversation, tree=tree)
        runs = list(conversation.runs.filter(pk__in=path).order_by("created_at", "id"))
    out["messages"] = [message_out(m) for m in messages]
    out["runs"] = [
        {
            **run_out(run),
            "selected": run.pk in path,
            "question_versions": tree.question_siblings(run.pk).as_dict(),
            "answer_versions": tree.answer_siblings(run.pk).as_dict(),
        }
        for run in runs
    ]
    active = conversation.runs.filter(status__in=Run.ACTIVE_STATUSES).order_by("-created_at")
    out["active_run_id"] = active.values_list("pk", flat=True).first()
    summaries = CompactionSummary.objects.filter(conversation=conversation).order_by("pk")
    out["compaction_summaries"] = [_row_out(row) for row in summaries]
    return out


def model_out(model) -> dict[str, Any]:
    """What a user may know of a model: never the provider's URL, key or headers."""
    return {
        "id": model.pk,
        "name": str(model),
        "model_id": model.model_id,
        "provider": model.provider.name,
        "is_default": model.is_default,
        "abilities": model.abilities,
        "context_window": model.context_window,
        "max_output_tokens": model.max_output_tokens,
        "roles": model.roles,
    }


# --------------------------------------------------------------------------- views


@api_view("GET", "POST")
def conversation_list_create(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return _conversation_create(request)
    limit = whole_number(
        request.GET.get("limit"),
        name="limit",
        default=LIST_LIMIT_DEFAULT,
        minimum=1,
        maximum=LIST_LIMIT_MAX,
    )
    offset = whole_number(
        request.GET.get("offset"), name="offset", default=0, maximum=LIST_OFFSET_MAX
    )
    qs = selectors.conversation_list(
        user=request.user,
        search=request.GET.get("q", "").strip(),
        archived=request.GET.get("archived") in ("1", "true"),
    ).select_related("model")
    page = list(qs[offset : offset + limit])
    return JsonResponse(
        {
            "count": qs.count(),
            "offset": offset,
            "limit": limit,
            "conversations": [conversation_summary(c, last_seq=c.last_event_seq) for c in page],
        }
    )


def _conversation_create(request: HttpRequest) -> HttpResponse:
    data = _json_body(request)
    _check_fields(data, {"title", "model", "mode"})
    title = _string(data, "title", max_chars=200) or ""
    model = None
    if data.get("model") is not None:
        model = _model_for(request.user, data["model"])
    conversation = services.conversation_create(
        owner=request.user, title=title, model=model, mode=_string(data, "mode") or "react"
    )
    response = JsonResponse(conversation_detail_out(conversation), status=201)
    response["Location"] = reverse("api_conversation", args=[conversation.pk])
    return response


@api_view("GET", "PATCH", "DELETE")
def conversation_detail(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conv = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    if request.method == "DELETE":
        services.conversation_delete(conversation=conv)
        return HttpResponse(status=204)
    if request.method == "PATCH":
        data = _json_body(request)
        _check_fields(data, {"title", "model", "archived", "mode"})
        if not data:
            raise ApplicationError(
                "Nothing to change: send title, model, mode or archived.",
                extra={"__all__": ["Send at least one of: title, model, mode, archived."]},
            )
        title = _string(data, "title", max_chars=200)
        archived = data.get("archived")
        if archived is not None and not isinstance(archived, bool):
            raise ApplicationError(
                "'archived' must be true or false.", extra={"archived": ["Must be a boolean."]}
            )
        model = _model_for(request.user, data["model"]) if "model" in data else None
        with transaction.atomic():  # all of the changes or none
            if "title" in data:
                services.conversation_rename(conversation=conv, title=title or "")
            if model is not None:
                services.conversation_set_model(
                    conversation=conv, user=request.user, model_id=model.pk
                )
            if archived is not None:
                services.conversation_archive(conversation=conv, archived=archived)
            if "mode" in data:
                services.conversation_set_mode(conversation=conv, mode=_string(data, "mode"))
    all_branches = request.GET.get("branch", "") == "all"
    return JsonResponse(conversation_detail_out(conv, all_branches=all_branches))


@api_view("POST")
def message_create(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conv = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    data = _json_body(request)
    _check_fields(data, {"content", "mode"})
    if "content" not in data:
        raise ApplicationError("'content' is required.", extra={"content": ["Required."]})
    content = _string(data, "content") or ""
    message, run, injected = services.message_post(
        conversation=conv, user=request.user, content=content, mode=_string(data, "mode") or ""
    )
    return JsonResponse(
        {
            "message_id": message.pk,
            "run_id": run.pk,
            "injected": injected,
            "run_status": run.status,
            "events_url": reverse("api_conversation_events", args=[conv.pk]),
        },
        status=202,
    )


@api_view("POST")
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = services.run_cancel(run=selectors.run_get(user=request.user, run_id=run_id))
    return JsonResponse(run_out(run), status=202)


@api_view("POST")
def run_retry(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get(user=request.user, run_id=run_id)
    return JsonResponse(run_out(branching.run_retry(run=run, user=request.user)), status=202)


@api_view("POST")
def run_resume(request: HttpRequest, run_id: int) -> HttpResponse:
    """``{"content": note}`` (optional): go on from a paused run's trace, as its
    continuation (the new run, 202)."""
    run = selectors.run_get(user=request.user, run_id=run_id)
    data = _json_body(request)
    _check_fields(data, {"content"})
    note = _string(data, "content")
    resumed = resuming.run_resume(run=run, user=request.user, content=note)
    return JsonResponse(run_out(resumed), status=202)


@api_view("POST")
def run_regenerate(request: HttpRequest, run_id: int) -> HttpResponse:
    """``{"model": id}`` (optional): a new answer to the run's question beside it."""
    run = selectors.run_get(user=request.user, run_id=run_id)
    data = _json_body(request) if request.headers.get("Content-Length", "0") != "0" else {}
    _check_fields(data, {"model"})
    model_id = _model_for(request.user, data["model"]).pk if data.get("model") else None
    regenerated = branching.run_regenerate(run=run, user=request.user, model_id=model_id)
    return JsonResponse(run_out(regenerated), status=202)


@api_view("POST")
def run_select(request: HttpRequest, run_id: int) -> HttpResponse:
    """Show this answer among its alternatives: the conversation on its branch."""
    run = selectors.run_get(user=request.user, run_id=run_id)
    branching.branch_select_run(run=run)
    return JsonResponse(conversation_detail_out(run.conversation))


@api_view("POST")
def message_edit(request: HttpRequest, message_id: int) -> HttpResponse:
    """``{"content": ...}``: ask the question again as edited, as a new branch."""
    message = selectors.message_get(user=request.user, message_id=message_id)
    data = _json_body(request)
    _check_fields(data, {"content"})
    if "content" not in data:
        raise ApplicationError("'content' is required.", extra={"content": ["Required."]})
    edited, run = branching.message_edit(
        message=message, user=request.user, content=_string(data, "content") or ""
    )
    return JsonResponse(
        {
            "message_id": edited.pk,
            "run_id": run.pk,
            "run_status": run.status,
            "events_url": reverse("api_conversation_events", args=[message.conversation_id]),
        },
        status=202,
    )


@api_view("POST")
def message_select(request: HttpRequest, message_id: int) -> HttpResponse:
    """Show this question among its edits: the conversation on its branch."""
    message = selectors.message_get(user=request.user, message_id=message_id)
    branching.branch_select_question(message=message)
    return JsonResponse(conversation_detail_out(message.conversation))


@api_view("POST")
def run_approval(request: HttpRequest, run_id: int, call_id: str) -> HttpResponse:
    """``{"approve": true|false}``: the decision on a tool call waiting for approval."""
    run = selectors.run_get(user=request.user, run_id=run_id)
    approve = _json_body(request).get("approve")
    if not isinstance(approve, bool):
        raise ApplicationError(
            "Say whether you approve the call.", extra={"approve": ["Must be true or false."]}
        )
    approval = services.approval_decide(
        run=run, call_id=call_id, user=request.user, approve=approve
    )
    return JsonResponse({"call_id": approval.call_id, "status": approval.status})


@api_view("POST")
def message_pin(request: HttpRequest, message_id: int) -> HttpResponse:
    message = selectors.message_get(user=request.user, message_id=message_id)
    return JsonResponse(message_out(services.message_set_pinned(message=message, pinned=True)))


@api_view("POST")
def message_unpin(request: HttpRequest, message_id: int) -> HttpResponse:
    message = selectors.message_get(user=request.user, message_id=message_id)
    return JsonResponse(message_out(services.message_set_pinned(message=message, pinned=False)))


@api_view("GET")
def model_list(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"models": [model_out(m) for m in models_for_user(user=request.user)]})


@api_view("GET")
def tool_list(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"tools": tools_available_for_user(user=request.user)})


def not_found(request: HttpRequest, path: str = "") -> HttpResponse:
    """Unknown /api/ paths answer JSON, not the HTML 404 page or a login redirect (ids
    too large for the database land here too: the ``<id:...>`` converter refuses them)."""
    return json_error(404, "Not found: no such API endpoint or id. See /api/schema.")


not_found.login_required = False  # type: ignore[attr-defined]
not_found.csrf_exempt = True  # type: ignore[attr-defined]
