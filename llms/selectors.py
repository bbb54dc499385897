"""Reads: which models a user may use, and how much of their daily quota is spent.

Everything here is synchronous ORM code; async callers wrap it in ``sync_to_async``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from core import configcache
from core.errors import ApplicationError
from llms.models import ROLES, LLMModel, RoleAssignment, UsageQuota, UsageRecord

__all__ = [
    "QuotaStatus",
    "default_model_for_user",
    "model_get_for_user",
    "models_for_user",
    "quota_limit_for_user",
    "quota_status_for_user",
    "role_models_for_user",
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
            _("This model is not available to you. Pick one from the list."),
            code="model_not_allowed",
        )
    return model


def default_model_for_user(*, user: Any) -> LLMModel | None:
    """The site default if the user may use it, else their first usable model, else None."""
    usable = models_for_user(user=user)
    return usable.filter(is_default=True).first() or usable.first()


def role_models_for_user(*, user: Any) -> dict[str, LLMModel]:
    """The model a plan step asking for each role gets; a role without one is absent.

    Per role, the first of these that the user may use (:func:`models_for_user`:
    enabled, group-allowed) wins, so a disabled or no-longer-allowed assignment falls
    through instead of emptying the role:

    1. an assignment to one of the user's groups, lowest group id first (a user in
       several groups with different assignments gets the same model on every run);
    2. the "everyone" assignment (no group);
    3. a model whose legacy ``roles`` list names the role, in :func:`models_for_user`
       order (what the engine's registry picked before assignments existed).

    Cached per user through :mod:`core.configcache` (assignments, models, groups and
    memberships bump its token); the models are shared: treat them as read-only.
    """
    if user is None or not user.is_authenticated:
        return {}
    found = configcache.cached(("role-models", user.pk), lambda: _role_models(user))
    return dict(found)  # callers may change their dict, never the cached one


def _role_models(user: Any) -> dict[str, LLMModel]:
    usable = {model.pk: model for model in models_for_user(user=user)}
    rows = RoleAssignment.objects.filter(
        Q(group__isnull=True) | Q(group_id__in=_group_ids(user))
    ).values_list("role", "group_id", "model_id")
    # Group rows by ascending group id, then the everyone row (group_id None).
    ordered = sorted(rows, key=lambda row: (row[1] is None, row[1] or 0))
    found: dict[str, LLMModel] = {}
    for role in ROLES:
        assigned = [model_id for row_role, _group, model_id in ordered if row_role == role]
        legacy = [pk for pk, model in usable.items() if role in _legacy_roles(model)]
        pk = next((pk for pk in (*assigned, *legacy) if pk in usable), None)
        if pk is not None:
            found[role] = usable[pk]
    return found


def _legacy_roles(model: LLMModel) -> list[str]:
    return model.roles if isinstance(model.roles, list) else []


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
