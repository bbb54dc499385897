"""Conversations: list, create, read, change, delete; send a message; the event stream."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from ninja import Router, Status

from conversations import chat_settings, presets, selectors, services
from conversations.api.docs import EVENTS_DESCRIPTION, errors
from conversations.api.lookups import model_for
from conversations.api.outputs import conversation_detail_out, conversation_summary, events_url
from conversations.api.params import (
    AfterEvent,
    Archived,
    Branch,
    ConversationId,
    FolderFilter,
    Follow,
    LastEventId,
    PinnedFilter,
    SearchText,
    TagFilter,
    whole,
)
from conversations.api.schemas import (
    ConversationChange,
    ConversationCreateBody,
    ConversationDetail,
    ConversationList,
    MessageNew,
    MessagePosted,
)
from conversations.http.params import DB_ID_MAX
from conversations.live import sse
from conversations.organise import folders, pins, tags
from conversations.selectors import NO_FOLDER
from core.errors import ApplicationError

router = Router(tags=["conversations"])

LIST_LIMIT_DEFAULT = 100
LIST_LIMIT_MAX = 500
LIST_OFFSET_MAX = DB_ID_MAX - LIST_LIMIT_MAX  # the page's end must fit a 64-bit OFFSET + LIMIT

Limit = whole("limit", default=LIST_LIMIT_DEFAULT, minimum=1, maximum=LIST_LIMIT_MAX)
Offset = whole("offset", default=0, maximum=LIST_OFFSET_MAX)


@router.get(
    "/conversations",
    response={200: ConversationList, **errors(400)},
    operation_id="listConversations",
    summary="List your conversations (newest first), by tag, folder or pin if asked",
    url_name="api_conversations",
)
def conversation_list(
    request: HttpRequest,
    q: SearchText = "",
    archived: Archived = "0",
    limit: Limit = LIST_LIMIT_DEFAULT,
    offset: Offset = 0,
    tag: TagFilter = "",
    folder: FolderFilter = "",
    pinned: PinnedFilter = "",
):
    in_folder = None
    if folder == "none":
        in_folder = NO_FOLDER
    elif folder:
        in_folder = folders.folder_get(user=request.user, folder_id=int(folder)).pk
    qs = selectors.conversation_list(
        user=request.user,
        search=q.strip(),
        archived=archived == "1",
        tag=tag.strip(),
        folder=in_folder,
        pinned={"1": True, "0": False}.get(pinned),
    ).select_related("model")
    qs = qs.prefetch_related("tags")
    page = list(qs[offset : offset + limit])
    return {
        "count": qs.count(),
        "offset": offset,
        "limit": limit,
        "conversations": [conversation_summary(c, last_seq=c.last_event_seq) for c in page],
    }


@router.post(
    "/conversations",
    response={201: ConversationDetail, **errors(400, 413)},
    operation_id="createConversation",
    summary="Create a conversation",
)
def conversation_create(
    request: HttpRequest, response: HttpResponse, payload: ConversationCreateBody
):
    model = model_for(request.user, payload.model) if payload.model is not None else None
    preset, from_preset = _preset_for(request.user, payload.preset)
    mode = payload.mode or (from_preset["mode"] if from_preset else "react")
    with transaction.atomic():  # created with all its settings, or not at all
        conversation = services.conversation_create(
            owner=request.user,
            title=payload.title or "",
            model=model or (from_preset["model"] if from_preset else None),
            mode=mode,
        )
        if preset is not None and from_preset is not None:
            presets.conversation_apply_preset(conversation, preset, from_preset)
        # What the body says explicitly wins over the preset's.
        _apply_chat_settings(request.user, conversation, payload, payload.model_fields_set)
        _apply_organising(conversation, payload, payload.model_fields_set)
    response["Location"] = reverse("api_conversation", args=[conversation.pk])
    return Status(201, conversation_detail_out(conversation))


@router.get(
    "/conversations/{id:conversation_id}",
    response={200: ConversationDetail, **errors(404)},
    operation_id="getConversation",
    summary="A conversation with its messages, runs and compaction summaries",
    url_name="api_conversation",
)
def conversation_get(
    request: HttpRequest, conversation_id: ConversationId, branch: Branch = "selected"
):
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    return conversation_detail_out(conversation, all_branches=branch == "all")


@router.patch(
    "/conversations/{id:conversation_id}",
    response={200: ConversationDetail, **errors(400, 404, 413)},
    operation_id="updateConversation",
    summary="Rename, switch model or mode, attach knowledge bases, set the system prompt, "
    "sampling parameters and tools, archive or restore, file in a folder, tag, pin",
)
def conversation_update(
    request: HttpRequest,
    conversation_id: ConversationId,
    payload: ConversationChange,
    branch: Branch = "selected",
):
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    given = payload.model_fields_set
    model = model_for(request.user, payload.model) if "model" in given else None
    with transaction.atomic():  # all of the changes or none
        if "title" in given:
            services.conversation_rename(conversation=conversation, title=payload.title)
        if model is not None:
            services.conversation_set_model(
                conversation=conversation, user=request.user, model_id=model.pk
            )
        if "archived" in given:
            services.conversation_archive(conversation=conversation, archived=payload.archived)
        if "mode" in given:
            services.conversation_set_mode(conversation=conversation, mode=payload.mode)
        if "knowledge" in given:
            services.conversation_set_knowledge(
                conversation=conversation, user=request.user, base_ids=payload.knowledge or []
            )
        _apply_chat_settings(request.user, conversation, payload, given)
        _apply_organising(conversation, payload, given)
    return conversation_detail_out(conversation, all_branches=branch == "all")


def _preset_for(user: Any, preset_id: int | None) -> tuple[Any, dict[str, Any] | None]:
    """The preset a new conversation starts from, and what it gets of it, checked with
    ``user``'s rights (a 400 naming ``preset``)."""
    if preset_id is None:
        return None, None
    try:
        preset = presets.preset_get_readable(user, preset_id)
    except Http404:
        message = _("No preset with this id is available to you (GET /api/presets).")
        raise ApplicationError(message, extra={"preset": [message]}) from None
    return preset, presets.preset_settings_for(user, preset)


def _apply_chat_settings(user: Any, conversation: Any, payload: Any, given: set[str]) -> None:
    """The chat's system prompt, sampling parameters and tools, those the body gives."""
    if "system_prompt" in given and payload.system_prompt is not None:
        chat_settings.conversation_set_system_prompt(
            conversation=conversation, system_prompt=payload.system_prompt
        )
    if "params" in given and payload.params is not None:
        params = payload.params
        chat_settings.conversation_set_params(
            conversation=conversation,
            user=user,
            params={name: getattr(params, name) for name in params.model_fields_set},
        )
    if "tools" in given:
        chat_settings.conversation_set_tools(
            conversation=conversation, user=user, tools=payload.tools
        )


def _apply_organising(conversation: Any, payload: Any, given: set[str]) -> None:
    """Its folder, tags and pin (:mod:`conversations.organise`), those the body gives."""
    if "folder" in given:
        folders.conversation_move(conversation=conversation, folder_id=payload.folder)
    if "tags" in given and payload.tags is not None:
        tags.conversation_set_tags(conversation=conversation, names=payload.tags)
    if "pinned" in given:
        pins.conversation_pin(conversation=conversation, pinned=payload.pinned)


@router.delete(
    "/conversations/{id:conversation_id}",
    response={204: None, **errors(404)},
    operation_id="deleteConversation",
    summary="Delete a conversation (stops its active run)",
)
def conversation_delete(request: HttpRequest, conversation_id: ConversationId):
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    services.conversation_delete(conversation=conversation)
    return HttpResponse(status=204)


@router.post(
    "/conversations/{id:conversation_id}/messages",
    response={202: MessagePosted, **errors(400, 404, 409, 413)},
    operation_id="postMessage",
    summary="Send a message: starts a run, or joins the active one",
    description="When a run is active the message is delivered to it as a follow-up "
    "(`injected: true`). Then read the run's events from "
    "`GET /api/conversations/{id}/events`.",
    url_name="api_conversation_messages",
)
def message_post(request: HttpRequest, conversation_id: ConversationId, payload: MessageNew):
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    message, run, injected = services.message_post(
        conversation=conversation,
        user=request.user,
        content=payload.content,
        mode=payload.mode or "",
        file_ids=payload.files,
    )
    return Status(
        202,
        {
            "message_id": message.pk,
            "run_id": run.pk,
            "injected": injected,
            "run_status": run.status,
            "events_url": events_url(conversation.pk),
        },
    )


@router.get(
    "/conversations/{id:conversation_id}/events",
    response={200: None, **errors(400, 404)},
    operation_id="streamEvents",
    summary="Stream the conversation's events (Server-Sent Events)",
    description=EVENTS_DESCRIPTION,
    url_name="api_conversation_events",
    openapi_extra={
        "responses": {
            200: {
                "description": "An endless or run-long event stream.",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            }
        }
    },
)
async def conversation_events(
    request: HttpRequest,
    conversation_id: ConversationId,
    last_event_id: LastEventId = None,
    after: AfterEvent = None,
    follow: Follow = "0",
    branch: Branch = "selected",
):
    """The stream (:func:`conversations.live.sse.conversation_events`) reads its parameters
    from the request itself; declared here, they are checked and documented first."""
    return await sse.conversation_events(request, conversation_id)
