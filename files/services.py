"""Storing and deleting a user's files: the one writer of :class:`~files.models.StoredFile`.

:func:`store` checks everything before anything is kept: the size, what the bytes are
(:mod:`files.detection`), that their text can be read (:mod:`files.extraction`) and the
owner's quota; then it writes the blob (its SHA-256 computed on the way) and the row in
one transaction. If anything fails, the blob is removed again: a refused upload leaves
no row and no file on disk.
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files import File
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import ProtectedError, RestrictedError
from django.utils.translation import gettext as _

from core import memory
from core.errors import ApplicationError
from files import detection, extraction
from files.models import StoredFile
from files.selectors import usage
from files.uploads import file_max_bytes, size_words, too_large_message

__all__ = [
    "NAME_MAX_CHARS",
    "delete",
    "delete_unattached",
    "file_quota_bytes",
    "sanitize_name",
    "store",
    "usage",
]

logger = logging.getLogger(__name__)

NAME_MAX_CHARS = 255  # StoredFile.name's column
EXTENSION_MAX_CHARS = 16
FALLBACK_NAME = "file"
# A file at least this large has its extraction's memory handed back to the system.
RELEASE_MEMORY_AFTER_BYTES = 1024 * 1024
# Characters no file name on a common system may hold, or that would confuse a download.
_FORBIDDEN = re.compile(r'[<>:"/\\|?*]')


def file_quota_bytes() -> int:
    return int(settings.AGENTSITE_FILE_QUOTA_BYTES)


def sanitize_name(raw: str) -> str:
    """A name safe to show and to offer as a download: the last path part only, without
    control or format characters, forbidden punctuation or leading dots, within
    :data:`NAME_MAX_CHARS` (the extension kept). Never used as a path: blobs get random
    names (:func:`files.models.blob_path`)."""
    name = unicodedata.normalize("NFC", raw or "")
    name = re.split(r"[/\\]", name)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")
    name = _FORBIDDEN.sub("_", name)
    name = " ".join(name.split()).strip(" .")
    if not name:
        return FALLBACK_NAME
    if len(name) > NAME_MAX_CHARS:
        stem, dot, extension = name.rpartition(".")
        if dot and stem and len(extension) <= EXTENSION_MAX_CHARS:
            name = stem[: NAME_MAX_CHARS - len(extension) - 1].rstrip(" .") + "." + extension
        else:
            name = name[:NAME_MAX_CHARS].rstrip(" .")
    return name or FALLBACK_NAME


class _Hashing(File):
    """The upload as the storage copies it, chunk by chunk, hashed on the way (so the
    bytes are read once more, not twice)."""

    def __init__(self, upload: UploadedFile) -> None:
        super().__init__(upload.file, name=upload.name)
        self.digest = hashlib.sha256()

    def chunks(self, chunk_size: int | None = None) -> Iterator[bytes]:
        for chunk in super().chunks(chunk_size):
            self.digest.update(chunk)
            yield chunk


def _check_quota(owner: Any, size: int) -> None:
    quota = file_quota_bytes()
    used = usage(owner)
    if used + size > quota:
        message = _(
            "Your files would take %(total)s, over your storage quota of %(quota)s: "
            "delete some files first."
        ) % {"total": size_words(used + size), "quota": size_words(quota)}
        raise ApplicationError(message, code="too_large", extra={"file": [message]})


def store(owner: Any, uploaded: UploadedFile) -> StoredFile:
    """Keep ``uploaded`` as one of ``owner``'s files, or refuse it (``ApplicationError``:
    400 for what it is, 413 over the size limit or the quota) keeping nothing."""
    name = sanitize_name(uploaded.name or "")
    limit = file_max_bytes()
    if uploaded.size is None or uploaded.size > limit:
        message = too_large_message(limit)
        raise ApplicationError(message, code="too_large", extra={"file": [message]})
    _check_quota(owner, uploaded.size)  # early: before reading the file
    detected = detection.detect(uploaded, name)
    try:
        extracted = extraction.extract(
            uploaded, kind=detected.kind, content_type=detected.content_type
        )
    finally:
        if uploaded.size >= RELEASE_MEMORY_AFTER_BYTES:
            memory.release()  # else the extraction's garbage stays in the server's heap
    stored = StoredFile(
        owner=owner,
        name=name,
        kind=detected.kind,
        content_type=detected.content_type,
        size=uploaded.size,
        text=extracted.text,
        pages=extracted.pages,
    )
    uploaded.seek(0)
    content = _Hashing(uploaded)
    try:
        stored.blob.save(name, content, save=False)  # outside the transaction: no lock held
        stored.sha256 = content.digest.hexdigest()
        with transaction.atomic():
            # One upload of a user at a time past this point, so two cannot both fit.
            get_user_model().objects.select_for_update().only("pk").get(pk=owner.pk)
            _check_quota(owner, stored.size)
            stored.save()
    except BaseException:
        if stored.blob.name:
            stored.blob.storage.delete(stored.blob.name)
        raise
    logger.info(
        "file %s stored for user %s (%s, %d bytes)", stored.pk, owner.pk, stored.kind, stored.size
    )
    return stored


def delete(file: StoredFile) -> None:
    """Delete the file (its blob goes once the deletion is committed:
    :func:`files.models._delete_blob`). A file attached to a message or a document of a
    knowledge base stays (409): they would lose it."""
    try:
        with transaction.atomic():
            file.delete()
    except RestrictedError as exc:
        # A knowledge base's document (RESTRICT: an account's deletion takes both). By app
        # label: the knowledge app sits above this one.
        if any(held._meta.app_label == "knowledge" for held in exc.restricted_objects):
            raise ApplicationError(
                _(
                    "This file is a document of a knowledge base, so it can't be deleted: "
                    "remove it from the knowledge base instead."
                ),
                code="conflict",
            ) from None
        raise
    except ProtectedError:
        raise ApplicationError(
            _(
                "This file is attached to a message, so it can't be deleted: delete the "
                "conversation instead."
            ),
            code="conflict",
        ) from None


def delete_unattached(files: Iterable[StoredFile]) -> int:
    """Delete those of ``files`` nothing holds any more (for whoever removes what held
    them, such as a conversation's deletion); the others stay. How many went.

    Held means a message's attachment or a knowledge base's document (both keep the file's
    row): a file uploaded to a base outlives the conversations it was attached to."""
    deleted = 0
    for file in files:
        try:
            delete(file)
        except ApplicationError:
            continue
        deleted += 1
    return deleted
