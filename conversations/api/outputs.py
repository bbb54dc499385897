"""What the API answers, read from the rows: the fields of :mod:`conversations.api.schemas`.

The same services and selectors as the HTMX views do the work; these only read the rows
they return, so the API and the browser cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from django.db.models import prefetch_related_objects
from django.http import HttpRequest
from django.urls import reverse

from conversations import selectors
from conversations.chat_settings import param_ranges
from conversations.history.numbering import last_event_seq
from conversations.history.tree import RunTree
from conversations.models import CompactionSummary, Conversation, Message, Run, SharedLink
from conversations.organise.tags import tag_names
from conversations.transfer import sharing
from conversations.transfer.exporting import message_fields
from files.models import StoredFile

__all__ = [
    "conversation_detail_out",
    "conversation_summary",
    "events_url",
    "message_out",
    "model_out",
    "run_out",
    "share_out",
]


def events_url(conversation_id: int) -> str:
    return reverse("api_conversation_events", args=[conversation_id])


def conversation_summary(conversation: Conversation, *, last_seq: int) -> dict[str, Any]:
    model = conversation.model
    return {
        "id": conversation.pk,
        "title": conversation.title,
        "title_by_user": conversation.title_by_user,
        "model": {"id": model.pk, "name": str(model)} if model is not None else None,
        "archived": conversation.archived,
        "mode": conversation.mode,
        "folder": conversation.folder_id,
        "tags": tag_names(conversation),  # prefetch "tags" for a list
        "pinned": conversation.pinned_at is not None,
        "created_at": conversation.created_at,
        "updated_at": conversation.updated_at,
        "last_event_seq": last_seq,
        "url": reverse("api_conversation", args=[conversation.pk]),
        "events_url": events_url(conversation.pk),
    }


def message_out(message: Message) -> dict[str, Any]:
    return {
        **message_fields(message),
        "run_id": message.run_id,
        "delivered_at": message.delivered_at,
        "created_at": message.created_at,
        "files": [attached_file_out(a.file) for a in message.attachments.all()],
    }


def attached_file_out(stored: StoredFile) -> dict[str, Any]:
    return {
        "id": stored.pk,
        "name": stored.name,
        "size": stored.size,
        "content_type": stored.content_type,
        "url": f"/api/files/{stored.pk}/content",
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
    out["knowledge"] = [
        {"id": base.pk, "name": base.name} for base in conversation.knowledge.order_by("name")
    ]
    out["system_prompt"] = conversation.system_prompt
    out["params"] = conversation.params or {}
    out["tools"] = conversation.tools
    prefetch_related_objects(messages, "attachments__file")
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
        "params": {
            name: {"min": allowed.low, "max": allowed.high}
            for name, allowed in param_ranges(model).items()
        },
    }


def share_out(request: HttpRequest, share: SharedLink) -> dict[str, Any]:
    return {
        "id": share.pk,
        "url": request.build_absolute_uri(sharing.share_url(share)),
        "title": share.title,
        "conversation_id": share.conversation_id,
        "include_artifacts": share.include_artifacts,
        "include_files": share.include_files,
        "active": share.is_active,
        "created_at": share.created_at,
        "revoked_at": share.revoked_at,
    }
