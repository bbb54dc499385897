"""The sidebar's conversation list: pages of rows, grouped by how recently they changed.

Pages follow a cursor (the last row's ``updated_at`` and id) rather than an offset, so
a conversation that moves to the top while the user scrolls does not shift the next
page and show a row twice.

Organised (issue 46): the pinned chats come first, then the folders with their chats
(each folder's first page; the rest loads as the main list's does), then the chats in
no folder as before. A search, a tag filter or the archived view lists every match flat.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from django.db.models import F, Q, QuerySet, Window, prefetch_related_objects
from django.db.models.functions import RowNumber
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from conversations import selectors
from conversations.models import Conversation, Folder
from conversations.organise.folders import FolderNode, folder_tree
from conversations.organise.tags import tags_in_use
from conversations.selectors import NO_FOLDER

PAGE_SIZE = 50
# Group keys, in English; the heading shown is their translation.
TODAY = gettext_noop("Today")
LAST_WEEK = gettext_noop("Previous 7 days")
OLDER = gettext_noop("Older")
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
    *,
    user,
    search: str = "",
    archived: bool = False,
    cursor: str = "",
    size: int = PAGE_SIZE,
    tag: str = "",
    folder: int | None = None,
    pinned: bool | None = None,
    by_day: bool = True,
) -> SidebarPage:
    """One page of the user's conversations, newest first, after ``cursor`` (the filters
    are :func:`conversations.selectors.conversation_list`'s).

    With ``by_day``, a group's heading shows once, on its first row, even when the group
    began on an earlier page (the cursor's time says which group that was).
    """
    today = timezone.localdate()
    rows = selectors.conversation_list(
        user=user, search=search, archived=archived, tag=tag, folder=folder, pinned=pinned
    )
    previous = None
    after = _parse_cursor(cursor) if cursor else None
    if after is not None:
        moment, pk = after
        rows = rows.filter(Q(updated_at__lt=moment) | Q(updated_at=moment, pk__lt=pk))
        previous = group_of(moment, today)
    found = list(rows.prefetch_related("tags")[: size + 1])
    page = SidebarPage()
    for conversation in found[:size]:
        group = group_of(conversation.updated_at, today)
        heading = _(group) if by_day and group != previous else None
        page.rows.append(Row(conversation, heading))
        previous = group
    if len(found) > size:
        page.next_cursor = cursor_for(found[size - 1])
    return page


# ------------------------------------------------------------------ organised (issue 46)

# The folders the user closed, by id ("3.17"): written by static/js/sidebar.js, read here
# so a closed folder is rendered closed (no flash of its rows after a reload or a swap).
CLOSED_FOLDERS_COOKIE = "agentsite_folders_closed"


@dataclass
class FolderView:
    folder: Folder
    page: SidebarPage  # its chats' first page (pinned ones show under Pinned instead)
    children: list[FolderView] = field(default_factory=list)
    open: bool = True


@dataclass
class Sidebar:
    """What the sidebar's list shows: ``page`` is the list as before (in the organised
    view, the chats in no folder); ``pinned`` and ``folders`` come above it."""

    page: SidebarPage
    flat: bool  # a search, a tag filter or the archived view: every match in one list
    pinned: list[Conversation] = field(default_factory=list)
    folders: list[FolderView] = field(default_factory=list)
    tree: list[FolderNode] = field(default_factory=list)  # for the "Move to" menus
    tags: list[str] = field(default_factory=list)  # for the filter


def _an_id(text: str) -> int | None:
    """A database id from a query string or cookie (None: not one, or past 64 bits)."""
    return (int(text) or None) if text.isdigit() and len(text) < 19 else None


def closed_folders(cookie: str) -> set[int]:
    return {pk for pk in map(_an_id, cookie.split(".")) if pk is not None}


def _folder_pages(user, size: int) -> dict[int, SidebarPage]:
    """Every folder's first page in one query (a row number per folder)."""
    number = Window(
        RowNumber(),
        partition_by=[F("folder_id")],
        order_by=[F("updated_at").desc(), F("id").desc()],
    )
    rows: QuerySet = selectors.conversation_list(user=user, pinned=False)
    found = list(rows.filter(folder__isnull=False).annotate(n=number).filter(n__lte=size + 1))
    prefetch_related_objects(found, "tags")
    pages: dict[int, SidebarPage] = {}
    for conversation in found:
        page = pages.setdefault(conversation.folder_id, SidebarPage())
        if len(page.rows) < size:
            page.rows.append(Row(conversation, None))
        else:
            page.next_cursor = cursor_for(page.rows[-1].conversation)
    return pages


def _pinned(user) -> list[Conversation]:
    rows = selectors.conversation_list(user=user, pinned=True).order_by("-pinned_at", "-id")
    return list(rows.prefetch_related("tags"))


def sidebar(user, params: Mapping[str, str], *, closed: AbstractSet[int] = frozenset()) -> Sidebar:
    """The sidebar's list for a request's parameters: ``q``, ``archived``, ``tag``,
    ``cursor`` (a next page) and ``folder`` (a next page of that folder's chats)."""
    search = params.get("q", "").strip()
    archived = params.get("archived") == "1"
    tag = params.get("tag", "").strip()
    cursor = params.get("cursor", "")
    flat = bool(search or tag or archived)
    tree = folder_tree(user=user)
    common = {"user": user, "search": search, "archived": archived, "tag": tag, "cursor": cursor}
    folder = _an_id(params.get("folder", ""))
    if folder is not None and not flat:  # the next page of one folder
        page = sidebar_page(**common, folder=folder, pinned=False, by_day=False)
        return Sidebar(page, flat, tree=tree)
    if flat:
        page = sidebar_page(**common)
    else:
        page = sidebar_page(**common, folder=NO_FOLDER, pinned=False)
    if cursor:  # a next page: its rows only
        return Sidebar(page, flat, tree=tree)
    view = Sidebar(page, flat, tree=tree, tags=[t.name for t in tags_in_use(user=user)])
    if flat:
        return view
    view.pinned = _pinned(user)
    pages = _folder_pages(user, PAGE_SIZE)

    def folder_view(f: Folder) -> FolderView:
        return FolderView(f, pages.get(f.pk, SidebarPage()), open=f.pk not in closed)

    for node in tree:
        top = folder_view(node.folder)
        top.children = [folder_view(child) for child in node.children]
        view.folders.append(top)
    return view


def sidebar_context(user, params: Mapping[str, str], cookies: Mapping[str, str]) -> dict:
    """The template context of the sidebar's list (templates/conversations/sidebar.html):
    ``sidebar`` is the page of rows as before, ``organised`` what comes above it."""
    closed = closed_folders(cookies.get(CLOSED_FOLDERS_COOKIE, ""))
    view = sidebar(user, params, closed=closed)
    folder = _an_id(params.get("folder", ""))
    return {
        "sidebar": view.page,
        "organised": view,
        "q": params.get("q", "").strip(),
        "archived": params.get("archived") == "1",
        "tag": params.get("tag", "").strip(),
        "folder_id": folder if not view.flat else None,
    }


def row_context(user) -> dict:
    """What one row needs besides its conversation: the folders of its "Move to" menu."""
    return {"organised": Sidebar(SidebarPage(), flat=True, tree=folder_tree(user=user))}
