"""Your token usage and its cost, and today's quota (:mod:`llms.usage` does the work, as
for the usage page). Only the caller's own usage: there is no way to name another user.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from conversations.api.docs import errors
from conversations.api.params import UsageDays
from conversations.api.schemas import UsageReport
from llms.usage import DEFAULT_PERIOD, Line, report_for_user

router = Router(tags=["usage"])


def _line(line: Line) -> dict[str, Any]:
    return line.figures.as_dict()


@router.get(
    "/usage",
    response={200: UsageReport, **errors(400)},
    operation_id="getUsage",
    summary="Your tokens and their cost per day and per model, and today's quota",
    description="The last `days` days (7, 30 or 90; default 30), today included, in the "
    "site's time zone. A cost is the model's prices when each run ended, summed per "
    "currency.",
    url_name="api_usage",
)
def usage(request: HttpRequest, days: UsageDays = DEFAULT_PERIOD):
    report = report_for_user(user=request.user, days=days)
    quota = report.quota
    return {
        "days": report.days,
        "since": report.since,
        "until": report.until,
        "total": report.total.as_dict(),
        "by_day": [{"day": line.key, **_line(line)} for line in report.by_day],
        "by_model": [
            {"model_id": line.key, "name": line.label, "provider": line.detail, **_line(line)}
            for line in report.by_model
        ],
        "quota": {
            "limit": quota.limit,
            "used_today": quota.used,
            "left": quota.remaining,
            "resets_at": quota.resets_at,
        },
    }
