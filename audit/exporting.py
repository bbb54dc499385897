"""The audit log as CSV or JSON lines, streamed row by row (a large log never sits in
memory: the rows are read with a server-side cursor where the database has one)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import QuerySet

from audit.models import AuditEvent

__all__ = ["COLUMNS", "csv_lines", "json_lines"]

COLUMNS = (
    "id",
    "occurred_at",
    "actor_id",
    "actor_name",
    "action",
    "target_type",
    "target_id",
    "target_label",
    "changes",
    "address",
    "request_id",
)
CHUNK = 2000


def _rows(queryset: QuerySet[AuditEvent]) -> Iterator[dict[str, Any]]:
    for row in queryset.values(*COLUMNS).iterator(chunk_size=CHUNK):
        row["occurred_at"] = row["occurred_at"].isoformat()
        yield row


class _Echo:
    """A file whose write returns the line: csv.writer's output without a buffer."""

    def write(self, value: str) -> str:
        return value


def csv_lines(queryset: QuerySet[AuditEvent]) -> Iterable[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(COLUMNS)
    for row in _rows(queryset):
        row["changes"] = json.dumps(row["changes"], cls=DjangoJSONEncoder, ensure_ascii=False)
        yield writer.writerow([row[c] if row[c] is not None else "" for c in COLUMNS])


def json_lines(queryset: QuerySet[AuditEvent]) -> Iterable[str]:
    for row in _rows(queryset):
        yield json.dumps(row, cls=DjangoJSONEncoder, ensure_ascii=False) + "\n"
