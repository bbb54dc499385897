"""Reads: which models a user may use, and how much of their daily quota is spent.

Everything here is synchronous ORM code; async callers wrap it in ``sync_to_async``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, Sum
from django.utils import timezone

from agentsite.errors import ApplicationError
from llms.models import LLMModel, UsageQuota, UsageRecord

__all__ = [
    "QuotaStatus",
    "default_model_for_user",
    "model_get_for_user",
    "models_for_user",
    "quota_limit_for_user",
    "quota_status_for_user",
    "usage_today_for_user",
]


def _group_ids(user: Any) -> QuerySet:
    return user.groups.values("pk")


def models_for_user(*, user: Any) -> QuerySet[LLMModel]:
    """Enabled models the user may use: no group restriction, or a group of theirs."""
    if user is None or not user.is_authenticated:
        return LLMModel.objects.none()
    links = LLMModel.allowed_groups.through.objects.filter(llmmodel_id=OuterRef("pk"))
    return (
        LLMModel.objects.filter(enabled=True)
        .filter(~Exists(links) | Exists(links.filter(group_id__in=_group_ids(user))))
        .select_related("provider")
    )


def model_get_for_user(*, user: Any, model_id: int | str | None) -> LLMModel:
    """The model with primary key ``model_id`` if the user may use it.

    The one gate for a model chosen in a request: an unknown, disabled or group-restricted
    id is refused the same way, so a crafted POST learns nothing.
    """
    try:
        pk = int(model_id)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        pk = None
    model = models_for_user(user=user).filter(pk=pk).first() if pk is not None else None
    if model is None:
        raise ApplicationError(
            "This model is not available to you. Pick one from the list.",
            code="model_not_allowed",
        )
    return model


def default_model_for_user(*, user: Any) -> LLMModel | None:
    """The site default if the user may use it, else their first usable model, else None."""
    usable = models_for_user(user=user)
    return usable.filter(is_default=True).first() or usable.first()


def usage_today_for_user(*, user: Any) -> int:
    """Total tokens the user spent today (site time zone), across all models."""
    used = UsageRecord.objects.filter(user=user, day=timezone.localdate()).aggregate(
        total=Sum("total_tokens")
    )["total"]
    return int(used or 0)


def quota_limit_for_user(*, user: Any) -> int | None:
    """The smallest daily token limit set on the user or any of their groups, else None."""
    limits = UsageQuota.objects.filter(Q(user=user) | Q(group_id__in=_group_ids(user))).values_list(
        "daily_token_limit", flat=True
    )
    return min(limits, default=None)


@dataclass(frozen=True)
class QuotaStatus:
    """For the UI: today's use, the limit (None = unlimited) and when the count resets."""

    used: int
    limit: int | None
    resets_at: dt.datetime

    @property
    def exceeded(self) -> bool:
        return self.limit is not None and self.used >= self.limit

    @property
    def remaining(self) -> int | None:
        return None if self.limit is None else max(0, self.limit - self.used)


def next_reset() -> dt.datetime:
    """The next local midnight (site TIME_ZONE): when daily usage starts from zero."""
    tomorrow = timezone.localdate() + dt.timedelta(days=1)
    return timezone.make_aware(dt.datetime.combine(tomorrow, dt.time.min))


def quota_status_for_user(*, user: Any) -> QuotaStatus:
    return QuotaStatus(
        used=usage_today_for_user(user=user),
        limit=quota_limit_for_user(user=user),
        resets_at=next_reset(),
    )
