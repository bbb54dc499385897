"""Usage as CSV for spreadsheets: one row per day, user and model (a usage row), streamed
(a long period never sits in memory; rows read with a server-side cursor where the
database has one)."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from typing import Any

from llms.usage import DELETED_MODEL, Line, records_in_period

__all__ = ["COLUMNS", "TABLE_COLUMNS", "csv_lines", "filename", "table_csv_lines"]

COLUMNS = (
    "day",
    "user",
    "model",
    "provider",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "runs",
    "cost",
    "currency",
)
CHUNK = 2000
# A cell starting with one of these is a formula to a spreadsheet (CSV injection): a
# username like "@SUM(...)" or "-2+3" is written as text instead (OWASP's advice).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class _Echo:
    """A file whose write returns the line: csv.writer's output without a buffer."""

    def write(self, value: str) -> str:
        return value


def _text(value: str) -> str:
    return f"'{value}" if value.startswith(FORMULA_STARTS) else value


def _rows(days: int) -> Iterator[list[Any]]:
    rows = (
        records_in_period(days)
        .order_by("day", "user__username", "model__provider__name", "model__model_id")
        .values_list(
            "day",
            "user__username",
            "model__display_name",
            "model__model_id",
            "model__provider__name",
            "prompt_tokens",
            "completion_tokens",
            "total_tokens",
            "runs",
            "cost",
            "currency",
        )
    )
    for day, user, display_name, model_id, provider, *counts, cost, currency in rows.iterator(
        chunk_size=CHUNK
    ):
        model = display_name or model_id or DELETED_MODEL
        yield [
            day.isoformat(),
            _text(user),
            _text(model),
            _text(provider or ""),
            *counts,
            "" if cost is None else str(cost),
            currency,
        ]


def csv_lines(days: int) -> Iterable[str]:
    """The header, then a line per usage row of the last ``days`` days, oldest first;
    ``cost`` empty for a model without prices."""
    writer = csv.writer(_Echo())
    yield writer.writerow(COLUMNS)
    for row in _rows(days):
        yield writer.writerow(row)


def filename(days: int, today: Any, table: str = "") -> str:
    by = f"-by-{table}" if table else ""
    return f"usage{by}-{days}-days-to-{today:%Y-%m-%d}.csv"


TABLE_COLUMNS = (
    "name",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "runs",
    "cost",
    "currency",
)


def table_csv_lines(lines: Iterable[Line]) -> Iterator[str]:
    """A dashboard table (a registered breakdown: by preset) as CSV: a line per row and
    currency (a row priced in two currencies has two lines; tokens and runs on the first,
    so sums stay right), a row without prices with cost and currency empty."""
    writer = csv.writer(_Echo())
    yield writer.writerow(TABLE_COLUMNS)
    for line in lines:
        figures = line.figures
        counts = [
            figures.prompt_tokens,
            figures.completion_tokens,
            figures.total_tokens,
            figures.runs,
        ]
        for cost in figures.costs or (None,):
            priced = ["", ""] if cost is None else [str(cost.amount), cost.currency]
            yield writer.writerow([_text(str(line.label)), *counts, *priced])
            counts = [0, 0, 0, 0]
