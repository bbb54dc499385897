"""Reads of stored files: a user sees their own and nothing else (another user's id is
the same 404 as an id no row has, so ids tell nothing about other users)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet, Sum
from django.shortcuts import get_object_or_404

from files.models import StoredFile

__all__ = ["file_get_for_user", "files_for_user", "usage"]


def files_for_user(user: Any) -> QuerySet[StoredFile]:
    return StoredFile.objects.filter(owner=user)


def file_get_for_user(user: Any, file_id: int) -> StoredFile:
    """The user's file ``file_id``; ``Http404`` for anyone else's."""
    return get_object_or_404(StoredFile, pk=file_id, owner_id=user.pk)


def usage(owner: Any) -> int:
    """Bytes the owner's files take, all together (what the quota counts)."""
    total = StoredFile.objects.filter(owner_id=owner.pk).aggregate(total=Sum("size"))["total"]
    return int(total or 0)
