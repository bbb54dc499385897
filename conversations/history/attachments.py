"""What the model sees of the files attached to a message.

A small text file (a document's extracted text up to ``AGENTSITE_FILE_INLINE_CHARS``)
goes inline, after the message, between ``<file>`` tags that name it. A larger one is
named with its size and id, and the run gets the ``read_file`` tool to read it in parts,
so the context guard's budget holds whatever the upload. Images go to a model with the
``vision`` ability as image parts of the question (sending one to a model without it is
refused before anything is saved: ``conversations/attachments.py``); in earlier messages
of the history they are named only.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import (
    Case,
    F,
    Prefetch,
    TextField,
    Value,
    When,
    prefetch_related_objects,
)
from django.db.models.functions import Length

from files.models import StoredFile

__all__ = [
    "AttachedText",
    "conversation_file",
    "image_parts",
    "load_files",
    "message_files",
    "readable_file_ids",
    "with_files",
]


@dataclass
class AttachedText:
    """A message's text with its files as the model reads them; ``readable`` are the
    files too large to inline, which the ``read_file`` tool reads."""

    text: str
    readable: list[StoredFile] = field(default_factory=list)
    images: list[StoredFile] = field(default_factory=list)


def load_files(messages: Iterable[Any]) -> None:
    """Prefetch the messages' files as the model reads them: the text only of those that
    go inline, the length of the others (a long file's text is never read per run)."""
    limit = settings.AGENTSITE_FILE_INLINE_CHARS
    files = StoredFile.objects.defer("text").annotate(
        characters=Length("text"),
        inline_text=Case(
            When(characters__lte=limit, then=F("text")), default=Value(""), output_field=TextField()
        ),
    )
    prefetch_related_objects(list(messages), Prefetch("attachments__file", queryset=files))


def message_files(message: Any) -> list[StoredFile]:
    """A message's files in the order attached (loaded by :func:`load_files`)."""
    return [attachment.file for attachment in message.attachments.all()]


def with_files(content: str, files: Sequence[StoredFile]) -> AttachedText:
    """``content`` followed by its files (loaded by :func:`load_files`): inline, named
    for ``read_file``, or images."""
    limit = settings.AGENTSITE_FILE_INLINE_CHARS
    blocks: list[str] = []
    attached = AttachedText(text=content)
    for stored in files:
        if stored.kind == StoredFile.Kind.IMAGE:
            attached.images.append(stored)
            blocks.append(f'<image name="{_quoted(stored.name)}" file_id="{stored.pk}"/>')
        elif stored.characters <= limit:
            blocks.append(
                f'<file name="{_quoted(stored.name)}" file_id="{stored.pk}">\n'
                f"{stored.inline_text}\n</file>"
            )
        else:
            attached.readable.append(stored)
            pages = f' pages="{len(stored.pages)}"' if stored.pages else ""
            blocks.append(
                f'<file name="{_quoted(stored.name)}" file_id="{stored.pk}" '
                f'characters="{stored.characters}"{pages}>Too long to show here: read it '
                f"with the read_file tool (file_id {stored.pk}, offset, limit).</file>"
            )
    if blocks:
        attached.text = f"{content}\n\n" + "\n\n".join(blocks) if content else "\n\n".join(blocks)
    return attached


def image_parts(images: Iterable[StoredFile]) -> list[dict[str, Any]]:
    """OpenAI-style ``image_url`` parts with the images' bytes as data URLs."""
    parts = []
    for image in images:
        with image.blob.open("rb") as handle:
            data = base64.b64encode(handle.read()).decode("ascii")
        parts.append(
            {"type": "image_url", "image_url": {"url": f"data:{image.content_type};base64,{data}"}}
        )
    return parts


def readable_file_ids(*, conversation_id: int, owner_id: int) -> list[int]:
    """The conversation's files too long to inline (what ``read_file`` may read)."""
    return list(
        StoredFile.objects.filter(owner_id=owner_id, messages__conversation_id=conversation_id)
        .exclude(kind=StoredFile.Kind.IMAGE)
        .annotate(characters=Length("text"))
        .filter(characters__gt=settings.AGENTSITE_FILE_INLINE_CHARS)
        .values_list("pk", flat=True)
        .distinct()
    )


def conversation_file(*, conversation_id: int, owner_id: int, file_id: int) -> StoredFile | None:
    """One of the conversation's files of its owner, or None."""
    return (
        StoredFile.objects.filter(
            pk=file_id, owner_id=owner_id, messages__conversation_id=conversation_id
        )
        .distinct()
        .first()
    )


def _quoted(name: str) -> str:
    return name.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
