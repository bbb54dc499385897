"""The sidebar's conversation list: pages of rows, grouped by how recently they changed.

Pages follow a cursor (the last row's ``updated_at`` and id) rather than an offset, so
a conversation that moves to the top while the user scrolls does not shift the next
page and show a row twice.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from django.db.models import Q
from django.utils import timezone

from conversations import selectors
from conversations.models import Conversation

PAGE_SIZE = 50
TODAY, LAST_WEEK, OLDER = "Today", "Previous 7 days", "Older"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


@dataclass(frozen=True)
class Row:
    conversation: Conversation
    heading: str | None  # the group's name, on the first row of each group


@dataclass
class SidebarPage:
    rows: list[Row] = field(default_factory=list)
    next_cursor: str = ""  # empty: this is the last page


def group_of(moment: dt.datetime, today: dt.date | None = None) -> str:
    """Today / Previous 7 days / Older, by the date in the current time zone."""
    today = today or timezone.localdate()
    day = timezone.localtime(moment).date()
    if day >= today:
        return TODAY
    if day >= today - dt.timedelta(days=7):
        return LAST_WEEK
    return OLDER


def cursor_for(conversation: Conversation) -> str:
    micros = (conversation.updated_at - _EPOCH) // _MICROSECOND
    return f"{micros}.{conversation.pk}"


def _parse_cursor(cursor: str) -> tuple[dt.datetime, int] | None:
    try:
        micros, pk = (int(part) for part in cursor.split("."))
    except ValueError:
        return None
    return _EPOCH + dt.timedelta(microseconds=micros), pk


def sidebar_page(
    *, user, search: str = "", archived: bool = False, cursor: str = "", size: int = PAGE_SIZE
) -> SidebarPage:
    """One page of the user's conversations, newest first, after ``cursor``.

    A group's heading shows once, on its first row, even when the group began on an
    earlier page (the cursor's time says which group that was).
    """
    today = timezone.localdate()
    rows = selectors.conversation_list(user=user, search=search, archived=archived)
    previous = None
    after = _parse_cursor(cursor) if cursor else None
    if after is not None:
        moment, pk = after
        rows = rows.filter(Q(updated_at__lt=moment) | Q(updated_at=moment, pk__lt=pk))
        previous = group_of(moment, today)
    found = list(rows[: size + 1])
    page = SidebarPage()
    for conversation in found[:size]:
        group = group_of(conversation.updated_at, today)
        page.rows.append(Row(conversation, group if group != previous else None))
        previous = group
    if len(found) > size:
        page.next_cursor = cursor_for(found[size - 1])
    return page
