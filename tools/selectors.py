"""Reads: which tool configurations a user may use. Synchronous ORM code."""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from tools.models import ToolConfig

__all__ = ["toolconfigs_for_user"]


def toolconfigs_for_user(*, user: Any) -> QuerySet[ToolConfig]:
    """Enabled rows the user may use: no group restriction, or one of their groups.

    Registration in code is checked by the caller (:mod:`tools.services`), not here.
    """
    if user is None or not user.is_authenticated:
        return ToolConfig.objects.none()
    links = ToolConfig.allowed_groups.through.objects.filter(toolconfig_id=OuterRef("pk"))
    mine = links.filter(group_id__in=user.groups.values("pk"))
    return ToolConfig.objects.filter(enabled=True).filter(~Exists(links) | Exists(mine))
