"""Attaching the owner's files to a message they send.

Checked before anything is saved, so a refusal keeps the typed text and the files on
the page (and a script gets a 400 naming ``files``): every id must be one of the user's
files, at most ``AGENTSITE_MESSAGE_MAX_FILES`` of them, and an image needs a model with
the ``vision`` ability, no larger than ``AGENTSITE_IMAGE_MAX_BYTES``. A model without
vision is never sent an image silently dropped: the user is told to pick another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from conversations.models import Message, MessageFile
from core.errors import ApplicationError
from files.models import StoredFile

__all__ = ["attach", "attachments_clean"]


def _refused(message: str) -> ApplicationError:
    return ApplicationError(message, extra={"files": [message]})


def attachments_clean(*, user: Any, file_ids: Sequence[Any] | None, model: Any) -> list[StoredFile]:
    """The user's files named by ``file_ids``, in that order, fit to send to ``model``
    (None: the user's default, whose abilities are checked when the run starts)."""
    if not file_ids:
        return []
    ids: list[int] = []
    for value in file_ids:
        try:
            file_id = int(value)
        except (TypeError, ValueError):
            raise _refused(_("%(value)s is not a file id.") % {"value": repr(value)}) from None
        if file_id not in ids:
            ids.append(file_id)
    limit = settings.AGENTSITE_MESSAGE_MAX_FILES
    if len(ids) > limit:
        raise _refused(
            ngettext(
                "At most %(limit)d file can go with one message.",
                "At most %(limit)d files can go with one message.",
                limit,
            )
            % {"limit": limit}
        )
    found = {f.pk: f for f in StoredFile.objects.filter(owner=user, pk__in=ids)}
    missing = [file_id for file_id in ids if file_id not in found]
    if missing:
        raise _refused(
            _("No file %(id)s of yours: upload it first (POST /api/files).") % {"id": missing[0]}
        )
    files = [found[file_id] for file_id in ids]
    images = [f for f in files if f.kind == StoredFile.Kind.IMAGE]
    if images:
        _check_images(images, model)
    return files


def _check_images(images: list[StoredFile], model: Any) -> None:
    if model is not None and not (model.abilities or {}).get("vision"):
        raise _refused(
            _(
                "%(model)s cannot read images, so %(name)s was not sent. Pick a model "
                "with vision for this conversation, or remove the image."
            )
            % {"model": model, "name": images[0].name}
        )
    too_large = [f for f in images if f.size > settings.AGENTSITE_IMAGE_MAX_BYTES]
    if too_large:
        megabytes = settings.AGENTSITE_IMAGE_MAX_BYTES / (1024 * 1024)
        raise _refused(
            _("%(name)s is too large to send to a model: images may be at most %(size)s MB.")
            % {"name": too_large[0].name, "size": f"{megabytes:g}"}
        )


def attach(message: Message, files: Sequence[StoredFile]) -> None:
    """Attach ``files`` to ``message`` in order (inside the caller's transaction)."""
    MessageFile.objects.bulk_create(
        MessageFile(message=message, file=stored, position=position)
        for position, stored in enumerate(files)
    )
