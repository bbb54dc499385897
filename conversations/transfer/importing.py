"""Import a JSON export (:mod:`conversations.transfer.exporting`) as a new conversation.

Anything that is not an export of a known ``format`` and ``version`` is refused before a
row is written. Imported runs are finished records without events: their answers and
usage come back, their tool cards (events) do not.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.services import Client, record
from conversations.models import Conversation, Message, Run
from conversations.services import conversation_create, message_max_chars
from conversations.transfer.exporting import EXPORT_FORMAT, EXPORT_VERSION
from conversations.transfer.jsoninput import MAX_DEPTH, UnstorableJSON, loads_storable
from core.errors import ApplicationError

# Rows per INSERT or UPDATE statement of an import.
BATCH = 500


def import_max_bytes() -> int:
    """The largest export file import reads: the site's request body limit."""
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)


def _refuse(message: str, code: str = "invalid") -> ApplicationError:
    return ApplicationError(message, code=code, extra={"file": [message]})


def _parse(raw: bytes) -> dict[str, Any]:
    limit = import_max_bytes()
    if len(raw) > limit:
        message = _("The file is too large (the limit is %(limit)s bytes).") % {
            "limit": f"{limit:,}"
        }
        raise _refuse(message, "too_large")
    try:
        data = loads_storable(raw)
    except UnstorableJSON as exc:
        raise _refuse(_file_refusal(exc.reason)) from None
    if not isinstance(data, dict):
        raise _refuse(_("The file is not a conversation export (expected a JSON object)."))
    if data.get("format") != EXPORT_FORMAT:
        raise _refuse(
            _(
                "The file is not an agentsite conversation export (its format is "
                "%(format)s, expected %(expected)s)."
            )
            % {"format": repr(str(data.get("format"))[:60]), "expected": repr(EXPORT_FORMAT)}
        )
    version = data.get("version")
    if version != EXPORT_VERSION or isinstance(version, bool):
        raise _refuse(
            _("Export version %(version)s is not supported: this site reads version %(supported)s.")
            % {"version": json.dumps(version)[:20], "supported": EXPORT_VERSION}
        )
    return data


def _file_refusal(reason: str) -> str:
    """Why the file is not storable JSON, in the language of the request."""
    if reason == "invalid":
        return _("The file is not JSON: choose a JSON export of a conversation.")
    if reason == "too_deep":
        return _("The file is nested deeper than %(depth)s levels.") % {"depth": MAX_DEPTH}
    if reason == "surrogate":
        return _("The file holds text that is not valid Unicode.")
    return _("The file holds a number too large to store (such as 1e999).")


_TOP_FIELDS = {"format", "version", "scope", "exported_at", "conversation", "messages", "runs"}
# "files": references to attached files (name, size, type); an export has no bytes, so
# an import keeps the messages without them.
_MESSAGE_FIELDS = {
    "id", "seq", "role", "kind", "content", "reasoning", "incomplete", "pinned", "usage",
    "created_at", "run_id", "files",
}  # fmt: skip
# "sources": the knowledge passages a run's answer may cite ({number, where}); an import
# has no tool events to show them from, so it keeps the answer's "[n]" as text.
_RUN_FIELDS = {
    "id", "parent_id", "trigger_message_id", "status", "selected", "iterations", "usage",
    "elapsed", "error", "model", "created_at", "sources",
}  # fmt: skip


class _Reader:
    """Typed field access on one object of the file, with errors saying where."""

    def __init__(self, value: Any, where: str, allowed: set[str], required: set[str]) -> None:
        if not isinstance(value, dict):
            raise _refuse(_("%(where)s must be an object.") % {"where": where})
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise _refuse(
                _("%(where)s has unknown field(s): %(names)s.")
                % {"where": where, "names": ", ".join(unknown)[:200]}
            )
        missing = sorted(required - set(value))
        if missing:
            raise _refuse(
                _("%(where)s lacks the field(s): %(names)s.")
                % {"where": where, "names": ", ".join(missing)}
            )
        self.value, self.where = value, where

    def get(self, name: str, types: tuple[type, ...], default: Any = None) -> Any:
        value = self.value.get(name, default)
        if value is None and default is None and None in types:
            return None
        bad_bool = isinstance(value, bool) and bool not in types
        if bad_bool or not isinstance(value, tuple(t for t in types if t is not None)):
            raise _refuse(
                _("%(where)s: '%(name)s' has the wrong type.") % {"where": self.where, "name": name}
            )
        return value

    def whole(
        self, name: str, *, nullable: bool = False, default: Any = None, maximum: int = 2**62
    ) -> int | None:
        value = self.get(name, (int, None) if nullable else (int,), default)
        if value is not None and not 0 <= value <= maximum:
            raise _refuse(
                _("%(where)s: '%(name)s' is out of range.") % {"where": self.where, "name": name}
            )
        return value

    def text(self, name: str, max_chars: int, default: str = "") -> str:
        value = self.get(name, (str,), default)
        if len(value) > max_chars:
            raise _refuse(
                _(
                    "%(where)s: '%(name)s' is too long (%(count)s characters; the limit "
                    "is %(limit)s)."
                )
                % {
                    "where": self.where,
                    "name": name,
                    "count": f"{len(value):,}",
                    "limit": f"{max_chars:,}",
                },
                "too_large",
            )
        return value

    def choice(self, name: str, choices: list[str]) -> str:
        value = self.get(name, (str,))
        if value not in choices:
            raise _refuse(
                _("%(where)s: '%(name)s' must be one of %(choices)s.")
                % {"where": self.where, "name": name, "choices": ", ".join(choices)}
            )
        return value


@dataclass
class _Plan:
    """The validated file: rows to create, in order."""

    title: str
    messages: list[dict[str, Any]]
    runs: list[dict[str, Any]]  # parents before children


def _plan(data: dict[str, Any]) -> _Plan:
    top = _Reader(data, _("The file"), _TOP_FIELDS, {"format", "version", "messages", "runs"})
    conversation = top.get("conversation", (dict,), {})
    title = conversation.get("title", "")
    if not isinstance(title, str):
        raise _refuse(_("The conversation's title must be text."))
    max_chars = message_max_chars()
    _check_counts(top.get("messages", (list,)), top.get("runs", (list,)))
    messages: list[dict[str, Any]] = []
    for index, value in enumerate(top.get("messages", (list,))):
        item = _Reader(
            value,
            _("Message %(n)s") % {"n": index + 1},
            _MESSAGE_FIELDS,
            {"id", "seq", "role", "content"},
        )
        messages.append(
            {
                "id": item.whole("id"),
                "seq": item.whole("seq"),
                "role": item.choice("role", Message.Role.values),
                "kind": item.choice("kind", Message.Kind.values)
                if "kind" in item.value
                else Message.Kind.CHAT,
                "content": item.text("content", max_chars),
                "reasoning": item.text("reasoning", max_chars),
                "incomplete": item.get("incomplete", (bool,), False),
                "pinned": item.get("pinned", (bool,), False),
                "usage": item.get("usage", (dict,), {}),
                "run_id": item.whole("run_id", nullable=True),
            }
        )
    runs: list[dict[str, Any]] = []
    for index, value in enumerate(top.get("runs", (list,))):
        item = _Reader(value, _("Run %(n)s") % {"n": index + 1}, _RUN_FIELDS, {"id", "status"})
        elapsed = item.get("elapsed", (int, float, None))
        runs.append(
            {
                "id": item.whole("id"),
                "parent_id": item.whole("parent_id", nullable=True),
                "trigger_message_id": item.whole("trigger_message_id", nullable=True),
                "status": item.choice("status", Run.Status.values),
                "selected": item.get("selected", (bool,), False),
                "iterations": item.whole("iterations", default=0, maximum=2**31 - 1),
                "usage": item.get("usage", (dict,), {}),
                "elapsed": float(elapsed)
                if elapsed is not None and math.isfinite(elapsed) and elapsed >= 0
                else None,
                "error": item.text("error", max_chars),
            }
        )
    _check_links(messages, runs)
    return _Plan(title.strip()[:200], sorted(messages, key=lambda m: m["seq"]), _ordered(runs))


def _check_counts(messages: list[Any], runs: list[Any]) -> None:
    """One import is bounded: its rows are written in one transaction, which holds the
    database's write lock (SQLite: every other writer waits) while it lasts."""
    for rows, limit, refusal in (
        (
            messages,
            settings.AGENTSITE_IMPORT_MAX_MESSAGES,
            _("The file holds %(count)s messages; an import takes at most %(limit)s messages."),
        ),
        (
            runs,
            settings.AGENTSITE_IMPORT_MAX_RUNS,
            _("The file holds %(count)s runs; an import takes at most %(limit)s runs."),
        ),
    ):
        if len(rows) > limit:
            raise _refuse(refusal % {"count": f"{len(rows):,}", "limit": f"{limit:,}"}, "too_large")


def _check_links(messages: list[dict[str, Any]], runs: list[dict[str, Any]]) -> None:
    message_ids = [m["id"] for m in messages]
    run_ids = [r["id"] for r in runs]
    if len(set(message_ids)) != len(message_ids):
        raise _refuse(_("Two messages of the file have the same id."))
    if len({m["seq"] for m in messages}) != len(messages):
        raise _refuse(_("Two messages of the file have the same number (seq)."))
    if len(set(run_ids)) != len(run_ids):
        raise _refuse(_("Two runs of the file have the same id."))
    known_runs, known_messages = set(run_ids), set(message_ids)
    for message in messages:
        if message["run_id"] is not None and message["run_id"] not in known_runs:
            raise _refuse(
                _("Message %(id)s names a run the file does not hold.") % {"id": message["id"]}
            )
    selected_parents: set[int | None] = set()
    for run in runs:
        if run["parent_id"] is not None and run["parent_id"] not in known_runs:
            raise _refuse(
                _("Run %(id)s continues a run the file does not hold.") % {"id": run["id"]}
            )
        trigger = run["trigger_message_id"]
        if trigger is not None and trigger not in known_messages:
            raise _refuse(
                _("Run %(id)s answers a message the file does not hold.") % {"id": run["id"]}
            )
        if run["selected"]:
            if run["parent_id"] in selected_parents:
                raise _refuse(
                    _("Two runs are selected at the fork of run %(id)s.") % {"id": run["id"]}
                )
            selected_parents.add(run["parent_id"])


def _ordered(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parents before their children, by id among siblings; a loop is refused."""
    children: dict[int | None, list[dict[str, Any]]] = {}
    for run in sorted(runs, key=lambda r: r["id"]):
        children.setdefault(run["parent_id"], []).append(run)
    ordered: list[dict[str, Any]] = []
    pending = list(reversed(children.get(None, [])))
    while pending:
        run = pending.pop()
        ordered.append(run)
        pending.extend(reversed(children.get(run["id"], [])))
    if len(ordered) != len(runs):
        raise _refuse(_("The runs of the file do not form a tree (a run continues itself)."))
    return ordered


def _run_row(conversation: Conversation, item: dict[str, Any], now: Any, earlier: Any) -> Run:
    status, error = item["status"], item["error"]
    if status in Run.ACTIVE_STATUSES:  # exported mid-run: it never finished
        status = Run.Status.FAILED
        error = error or _("The run was still working when the conversation was exported.")
    return Run(
        conversation=conversation,
        selected_at=now if item["selected"] else earlier,
        status=status,
        iterations=item["iterations"],
        usage=item["usage"],
        elapsed=item["elapsed"],
        error=error,
        started_at=now,
        finished_at=now,
    )


def _link_runs(links: Iterable[tuple[int | None, int | None, int]]) -> None:
    """Set each new run's parent and question: (parent id, message id, run id). One
    statement run for many rows (the database driver's ``executemany``): Django's
    ``bulk_update`` builds a CASE per row, 13 s for 8,000 runs on SQLite."""
    table = connection.ops.quote_name(Run._meta.db_table)
    parent = connection.ops.quote_name(Run._meta.get_field("parent").column)
    trigger = connection.ops.quote_name(Run._meta.get_field("trigger_message").column)
    key = connection.ops.quote_name(Run._meta.pk.column)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {table} SET {parent} = %s, {trigger} = %s WHERE {key} = %s", list(links)
        )


def conversation_import(*, owner, raw: bytes, client: Client | None = None) -> Conversation:
    """A new conversation of ``owner`` from an export file: all of it, or nothing (an
    :class:`ApplicationError` saying what is wrong with the file). Audited as
    ``conversation.imported``."""
    plan = _plan(_parse(raw))
    now = timezone.now()
    earlier = now - timedelta(seconds=1)
    with transaction.atomic():
        conversation = conversation_create(owner=owner, title=plan.title)
        # Runs, then messages, in batches; then the links between them (a run's parent
        # and question), which need the rows' new ids.
        runs = {item["id"]: _run_row(conversation, item, now, earlier) for item in plan.runs}
        Run.objects.bulk_create(runs.values(), batch_size=BATCH)
        rows = [
            Message(
                conversation=conversation,
                seq=number,
                role=item["role"],
                kind=item["kind"],
                content=item["content"],
                reasoning=item["reasoning"],
                incomplete=item["incomplete"],
                pinned=item["pinned"],
                usage=item["usage"],
                run=runs[item["run_id"]] if item["run_id"] is not None else None,
                delivered_at=now if item["kind"] == Message.Kind.INJECT else None,
            )
            for number, item in enumerate(plan.messages, start=1)
        ]
        Message.objects.bulk_create(rows, batch_size=BATCH)
        saved = {item["id"]: row.pk for item, row in zip(plan.messages, rows, strict=True)}
        _link_runs(
            (
                runs[item["parent_id"]].pk if item["parent_id"] is not None else None,
                saved[item["trigger_message_id"]] if item["trigger_message_id"] else None,
                runs[item["id"]].pk,
            )
            for item in plan.runs
            if item["parent_id"] is not None or item["trigger_message_id"] is not None
        )
        Conversation.objects.filter(pk=conversation.pk).update(last_message_seq=len(rows))
        conversation.last_message_seq = len(rows)
        record(
            "conversation.imported",
            actor=owner,
            target=conversation,
            changes={"messages": [None, len(rows)], "runs": [None, len(runs)]},
            client=client,
        )
    return conversation
