"""Reads of token usage and its cost over a period: one user's (their usage page and
``GET /api/usage``) and everyone's by user, group and model (the admin's dashboard).

Figures come from :class:`llms.models.UsageRecord`, one row per user, model and day
(site time zone). A cost is summed per currency, since models may be priced in different
ones; tokens of a model without prices count in the tokens and in no cost.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet, Sum
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from core.errors import ApplicationError
from llms.models import UsageRecord
from llms.pricing import COST_PLACES, Cost, money
from llms.selectors import QuotaStatus, quota_status_for_user

__all__ = [
    "BREAKDOWNS",
    "DEFAULT_PERIOD",
    "DELETED_MODEL",
    "NO_GROUP",
    "PERIODS",
    "Breakdown",
    "Dashboard",
    "Figures",
    "Line",
    "Table",
    "UsageReport",
    "biggest_first",
    "breakdown_register",
    "dashboard",
    "figures_of",
    "period_days",
    "period_start",
    "records_in_period",
    "report_for_user",
]

PERIODS = (7, 30, 90)
DEFAULT_PERIOD = 30
# In English for the CSV export; translated on pages (gettext_noop only marks them).
DELETED_MODEL = gettext_noop("(deleted model)")
NO_GROUP = gettext_noop("(no group)")

_SUMS = {
    "prompt": Sum("prompt_tokens"),
    "completion": Sum("completion_tokens"),
    "total": Sum("total_tokens"),
    "run_count": Sum("runs"),
    "cost_sum": Sum("cost"),
}


def period_days(raw: Any, *, strict: bool = True) -> int:
    """The period asked for, in days: 7, 30 or 90; blank or absent is 30.

    Anything else is refused naming ``days`` (``strict``, the API), or read as the
    default (a page, whose links only ever ask for the three).
    """
    text = "" if raw is None else str(raw).strip()
    if not text:
        return DEFAULT_PERIOD
    if text.isdigit() and int(text) in PERIODS:
        return int(text)
    if not strict:
        return DEFAULT_PERIOD
    choices = _("%(first)s or %(last)s") % {
        "first": ", ".join(str(days) for days in PERIODS[:-1]),
        "last": PERIODS[-1],
    }
    message = _("'days' must be %(choices)s.") % {"choices": choices}
    raise ApplicationError(
        message, code="invalid", extra={"days": [_("One of %(choices)s.") % {"choices": choices}]}
    )


def period_start(days: int, *, today: dt.date | None = None) -> dt.date:
    """The first day of a period of ``days`` days ending today (today included)."""
    return (today or timezone.localdate()) - dt.timedelta(days=days - 1)


@dataclass(frozen=True)
class Figures:
    """Tokens, runs and cost of some usage; ``costs`` one per currency, by currency."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    runs: int = 0
    costs: tuple[Cost, ...] = ()

    @property
    def cost_text(self) -> str:
        """For people: ``0.012 USD + 1.50 EUR``, or ``—`` when nothing was priced."""
        return " + ".join(f"{money(c.amount)} {c.currency}" for c in self.costs) or "—"

    def as_dict(self) -> dict[str, Any]:
        """For JSON: costs as decimal strings, never floats."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "runs": self.runs,
            "cost": [{"amount": str(c.amount), "currency": c.currency} for c in self.costs],
        }


@dataclass(frozen=True)
class Line:
    """The figures of one day, model, user or group."""

    key: Any  # a date, or a row's id (None: a deleted model, no group)
    label: str
    figures: Figures
    detail: str = ""  # a model's provider


@dataclass(frozen=True)
class UsageReport:
    """One user's usage over the last ``days`` days, and their quota today."""

    days: int
    since: dt.date
    until: dt.date
    total: Figures
    by_day: list[Line]
    by_model: list[Line]
    quota: QuotaStatus


@dataclass(frozen=True)
class Breakdown:
    """A table of the dashboard another app adds (conversations: by preset): its caption,
    the heading of its first column, and its lines for the period from a given day."""

    key: str
    caption: Any  # lazy text: translated when shown
    heading: Any
    lines: Callable[[dt.date], list[Line]]


@dataclass(frozen=True)
class Table:
    """A breakdown's lines for one period."""

    key: str
    caption: Any
    heading: Any
    lines: list[Line]


# Filled by the apps' ready() (breakdown_register), read by dashboard().
BREAKDOWNS: dict[str, Breakdown] = {}


def breakdown_register(breakdown: Breakdown) -> None:
    """Add a table to the admin's dashboard (by the same key again: replace it)."""
    BREAKDOWNS[breakdown.key] = breakdown


@dataclass(frozen=True)
class Dashboard:
    """Everyone's usage over the last ``days`` days (the admin's dashboard)."""

    days: int
    since: dt.date
    until: dt.date
    total: Figures
    by_day: list[Line]
    by_user: list[Line]
    by_group: list[Line]
    by_model: list[Line]
    more: list[Table] = field(default_factory=list)  # the registered breakdowns


@dataclass
class _Sums:
    """Figures being added up, row by row of a grouped query."""

    prompt: int = 0
    completion: int = 0
    total: int = 0
    runs: int = 0
    costs: dict[str, Decimal] = field(default_factory=dict)

    def add(self, row: dict[str, Any]) -> None:
        self.prompt += int(row["prompt"] or 0)
        self.completion += int(row["completion"] or 0)
        self.total += int(row["total"] or 0)
        self.runs += int(row["run_count"] or 0)
        if row["currency"] and row["cost_sum"] is not None:
            before = self.costs.get(row["currency"], Decimal(0))
            self.costs[row["currency"]] = before + Decimal(row["cost_sum"])

    def figures(self) -> Figures:
        # Sums come back with the database's own precision (SQLite: 17 places).
        costs = tuple(Cost(self.costs[c].quantize(COST_PLACES), c) for c in sorted(self.costs))
        return Figures(self.prompt, self.completion, self.total, self.runs, costs)


def records_in_period(days: int, *, today: dt.date | None = None) -> QuerySet[UsageRecord]:
    """Every usage row of the last ``days`` days (today included), no ordering."""
    return UsageRecord.objects.filter(day__gte=period_start(days, today=today)).order_by()


def _grouped(
    records: QuerySet[UsageRecord], *keys: str
) -> dict[tuple[Any, ...], tuple[dict[str, Any], _Sums]]:
    """The figures per value of ``keys`` (and the first row seen of each, for labels)."""
    found: dict[tuple[Any, ...], tuple[dict[str, Any], _Sums]] = {}
    for row in records.values(*keys, "currency").annotate(**_SUMS).order_by():
        key = tuple(row[k] for k in keys)
        _first, sums = found.setdefault(key, (row, _Sums()))
        sums.add(row)
    return found


def _total(records: QuerySet[UsageRecord]) -> Figures:
    sums = _Sums()
    for row in records.values("currency").annotate(**_SUMS).order_by():
        sums.add(row)
    return sums.figures()


def figures_of(rows: Iterable[dict[str, Any]]) -> Figures:
    """The figures of rows with the keys ``prompt``, ``completion``, ``total``,
    ``run_count``, ``currency`` and ``cost_sum`` (one row per currency)."""
    sums = _Sums()
    for row in rows:
        sums.add(row)
    return sums.figures()


def biggest_first(lines: Iterable[Line]) -> list[Line]:
    """Most tokens first, then by label."""
    return _biggest_first(lines)


def _biggest_first(lines: Iterable[Line]) -> list[Line]:
    return sorted(lines, key=lambda line: (-line.figures.total_tokens, line.label.casefold()))


def _by_day(records: QuerySet[UsageRecord]) -> list[Line]:
    """Newest first; days without usage are left out."""
    lines = [
        Line(day, f"{day:%Y-%m-%d}", sums.figures())
        for (day,), (_row, sums) in _grouped(records, "day").items()
    ]
    return sorted(lines, key=lambda line: line.key, reverse=True)


def _by_model(records: QuerySet[UsageRecord]) -> list[Line]:
    keys = ("model_id", "model__display_name", "model__model_id", "model__provider__name")
    lines = []
    for (model_id, *_rest), (row, sums) in _grouped(records, *keys).items():
        name = row["model__display_name"] or row["model__model_id"] or _(DELETED_MODEL)
        provider = row["model__provider__name"] or ""
        lines.append(Line(model_id, name, sums.figures(), detail=provider))
    return _biggest_first(lines)


def _by_user(records: QuerySet[UsageRecord]) -> list[Line]:
    return _biggest_first(
        Line(user_id, username, sums.figures())
        for (user_id, username), (_row, sums) in _grouped(
            records, "user_id", "user__username"
        ).items()
    )


def _by_group(records: QuerySet[UsageRecord]) -> list[Line]:
    """A user's usage counts in each of their groups (so the groups may add up to more
    than the total); users in none are one line, :data:`NO_GROUP`."""
    return _biggest_first(
        Line(group_id, name or _(NO_GROUP), sums.figures())
        for (group_id, name), (_row, sums) in _grouped(
            records, "user__groups__id", "user__groups__name"
        ).items()
    )


def report_for_user(*, user: Any, days: int) -> UsageReport:
    """The user's usage page and ``GET /api/usage``: their rows only."""
    today = timezone.localdate()
    records = records_in_period(days, today=today).filter(user=user)
    return UsageReport(
        days=days,
        since=period_start(days, today=today),
        until=today,
        total=_total(records),
        by_day=_by_day(records),
        by_model=_by_model(records),
        quota=quota_status_for_user(user=user),
    )


def dashboard(*, days: int) -> Dashboard:
    """The admin's dashboard: everyone's usage by day, user, group and model, and the
    breakdowns other apps registered."""
    today = timezone.localdate()
    records = records_in_period(days, today=today)
    return Dashboard(
        days=days,
        since=period_start(days, today=today),
        until=today,
        total=_total(records),
        by_day=_by_day(records),
        by_user=_by_user(records),
        by_group=_by_group(records),
        by_model=_by_model(records),
        more=[
            Table(b.key, b.caption, b.heading, b.lines(period_start(days, today=today)))
            for b in BREAKDOWNS.values()
        ],
    )
