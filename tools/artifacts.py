"""Artifact services: store what tools produce, within per-file and per-conversation quotas.

Tools return :class:`engine.Artifact` objects (content in memory, or a path). During a run
every tool built by this app is wrapped by :func:`persist_artifacts`, which saves them via
:func:`artifact_save` as soon as the tool returns, so the tool card can show the preview.
The model only ever sees the ``[Artifact generated: ...]`` summary.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import mimetypes
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.apps import apps
from django.conf import settings
from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import QuerySet, Sum

import engine
from core.errors import ApplicationError
from engine.tools import as_tool_result
from tools.models import Artifact
from tools.registry import ToolContext

__all__ = [
    "artifact_file_limit",
    "artifact_persist_results",
    "artifact_read_text",
    "artifact_save",
    "artifacts_for_run",
    "persist_artifacts",
]

logger = logging.getLogger(__name__)


def artifact_file_limit() -> int:
    return int(settings.ARTIFACT_MAX_BYTES)


def _conversation_limit() -> int:
    return int(settings.ARTIFACT_CONVERSATION_MAX_BYTES)


def _artifact_bytes(artifact: engine.Artifact, limit: int) -> bytes:
    if artifact.content is not None:
        data = artifact.content
        if isinstance(data, str):
            data = data.encode()
        if len(data) > limit:
            raise ApplicationError(_too_big(artifact.name, len(data), limit), code="too_large")
        return bytes(data)
    if not artifact.path:
        raise ApplicationError(f"artifact '{artifact.name}' has neither content nor a path")
    path = Path(artifact.path)
    size = path.stat().st_size
    if size > limit:
        raise ApplicationError(_too_big(artifact.name, size, limit), code="too_large")
    with path.open("rb") as fh:
        return fh.read(limit + 1)


def _too_big(name: str, size: int, limit: int) -> str:
    return f"artifact '{name}' is {size:,} bytes; the limit is {limit:,} bytes a file"


def artifact_save(
    *,
    conversation_id: int,
    run_id: int | None,
    tool_name: str,
    artifact: engine.Artifact,
) -> Artifact:
    """Store one artifact; :class:`ApplicationError` when a quota would be exceeded.

    The conversation row is locked while the quota is summed so two tools finishing at once
    cannot both squeeze under the limit.
    """
    data = _artifact_bytes(artifact, artifact_file_limit())
    if len(data) > artifact_file_limit():
        raise ApplicationError(
            _too_big(artifact.name, len(data), artifact_file_limit()), code="too_large"
        )
    mime = (
        artifact.mime_type or mimetypes.guess_type(artifact.name)[0] or "application/octet-stream"
    )
    conversation_model = apps.get_model("conversations", "Conversation")
    with transaction.atomic():
        list(conversation_model.objects.select_for_update().filter(pk=conversation_id))
        used = (
            Artifact.objects.filter(conversation_id=conversation_id).aggregate(total=Sum("size"))[
                "total"
            ]
            or 0
        )
        limit = _conversation_limit()
        if used + len(data) > limit:
            raise ApplicationError(
                f"artifact '{artifact.name}' not saved: this conversation's artifacts would "
                f"exceed {limit // (1024 * 1024)} MB",
                code="quota",
            )
        row = Artifact(
            conversation_id=conversation_id,
            run_id=run_id,
            tool_name=tool_name[:128],
            name=(artifact.name or "artifact")[:255],
            mime_type=mime[:127],
            size=len(data),
        )
        row.file.save(row.name, ContentFile(data), save=False)
        try:
            row.save()
        except Exception:
            row.file.delete(save=False)
            raise
    return row


def artifacts_for_run(run_id: int) -> QuerySet[Artifact]:
    """The artifacts a run produced, oldest first (the order its tools returned them)."""
    return Artifact.objects.filter(run_id=run_id).order_by("created_at", "id")


def artifact_read_text(artifact: Artifact, limit: int | None = None) -> str:
    """The artifact's content as text (for previews), at most ``limit`` bytes of it."""
    limit = limit or artifact_file_limit()
    with artifact.file.open("rb") as fh:
        data = fh.read(limit)
    return data.decode("utf-8", errors="replace")


def artifact_persist_results(
    context: ToolContext, result: engine.ToolResult, *, tool_name: str
) -> engine.ToolResult:
    """Save ``result``'s artifacts for the context's conversation (sync; call in a thread).

    An artifact over quota is dropped from the result and the refusal is appended to its
    content, so the model learns why there is no preview. Without a conversation (tests,
    admin checks) the result is returned unchanged.
    """
    if not result.artifacts or context.conversation_id is None:
        return result
    kept: list[engine.Artifact] = []
    notes: list[str] = []
    for item in result.artifacts:
        try:
            row = artifact_save(
                conversation_id=context.conversation_id,
                run_id=context.run_id,
                tool_name=tool_name,
                artifact=item,
            )
        except ApplicationError as exc:
            notes.append(exc.message)
            continue
        except Exception:
            logger.exception("could not save artifact %r of tool %s", item.name, tool_name)
            notes.append(f"artifact '{item.name}' could not be saved")
            continue
        item.path = row.file.name
        kept.append(item)
    if not notes:
        return result
    content = result.content
    if not kept and result.content_type in ("html", "markdown"):
        content = "(the generated document could not be stored)"
    content = "\n".join([content, *(f"[{note}]" for note in notes)]).strip()
    return engine.ToolResult(content, result.content_type, kept, result.is_error)


def persist_artifacts(tools: Iterable[engine.Tool], context: ToolContext) -> list[engine.Tool]:
    """Wrap each tool so the artifacts it returns are saved for ``context``'s conversation."""
    return [_wrap(t, context) for t in tools]


def _wrap(tool: engine.Tool, context: ToolContext) -> engine.Tool:
    if context.conversation_id is None:
        return tool
    func = tool.func
    # ORM writes go through Django's shared sync thread, as in async views.
    persist = sync_to_async(artifact_persist_results)

    async def call(**arguments: Any) -> engine.ToolResult:
        if inspect.iscoroutinefunction(func):
            value = await func(**arguments)
        else:
            value = await asyncio.to_thread(functools.partial(func, **arguments))
        result = as_tool_result(value)
        if result.artifacts:
            result = await persist(context, result, tool_name=tool.name)
        return result

    return engine.Tool(
        name=tool.name,
        description=tool.description,
        parameters=tool.parameters,
        func=call,
        timeout=tool.timeout,
        requires_confirmation=tool.requires_confirmation,
        confirm_if=tool.confirm_if,
        preview=tool.preview,
    )
