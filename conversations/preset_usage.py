"""Presets' use on the admin's usage dashboard: the tokens, runs and cost of the runs of
conversations started from each preset, over the dashboard's period (by the day a run
ended, in the site's time zone). Registered with llms.usage, which sits below presets."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.db.models import BigIntegerField, Count, DecimalField, F, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.utils.translation import gettext_lazy as _

from conversations.models import Run
from llms.usage import Breakdown, Line, biggest_first, figures_of

__all__ = ["BY_PRESET", "preset_lines"]


def _tokens(key: str) -> Sum:
    return Sum(Cast(KT(f"usage__{key}"), BigIntegerField()))


def preset_lines(since: dt.date) -> list[Line]:
    """One line per preset whose conversations had runs end since ``since``."""
    rows = (
        Run.objects.filter(conversation__preset__isnull=False, finished_at__date__gte=since)
        .values(
            preset=F("conversation__preset"),
            name=F("conversation__preset__name"),
            currency=KT("usage__currency"),
        )
        .annotate(
            prompt=_tokens("prompt_tokens"),
            completion=_tokens("completion_tokens"),
            total=_tokens("total_tokens"),
            run_count=Count("id"),
            cost_sum=Sum(Cast(KT("usage__cost"), DecimalField(max_digits=24, decimal_places=12))),
        )
        .order_by()
    )
    grouped: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[(row["preset"], row["name"])].append(row)
    return biggest_first(
        Line(preset_id, name, figures_of(found)) for (preset_id, name), found in grouped.items()
    )


BY_PRESET = Breakdown("preset", _("By preset"), _("Preset"), preset_lines)
