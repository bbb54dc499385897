"""The sidebar's folders, pins and tags (issue 46): HTMX views, thin over
:mod:`conversations.organise`.

Each answers with the whole list (``#conversation-list``): a pinned, moved or re-tagged
chat changes groups, and the folder menus and the tag filter change with it. The list's
filters (search, archived, tag) come with the request (``hx-include``), so the list comes
back as the user was seeing it. A refusal leaves the list as it is and says why above it
(``#sidebar-error``), with 422: django-htmx replaces the whole page with Django's debug
page for a 4xx other than that in debug mode.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from conversations import selectors
from conversations.organise import folders, pins, tags
from conversations.pages.sidebar import sidebar_context
from core.errors import ApplicationError

SIDEBAR = "conversations/sidebar.html"
LIST_FILTERS = ("q", "archived", "tag")  # what the list was showing (its hx-include)


def _answer(request: HttpRequest, error: str = "", *, status: int = 200) -> HttpResponse:
    html = render_to_string(f"{SIDEBAR}#sidebar-error", {"error": error, "oob": True}, request)
    if status == 200:
        shown = {name: request.POST.get(name, "") for name in LIST_FILTERS}
        context = sidebar_context(request.user, shown, request.COOKIES)
        html = render_to_string(f"{SIDEBAR}#conversation-list", context, request) + html
    response = HttpResponse(html, status=status)
    if status != 200:
        response["HX-Reswap"] = "none"
    return response


def _refused(request: HttpRequest, exc: ApplicationError) -> HttpResponse:
    return _answer(request, exc.message, status=422)


def _folder_id(raw: str | None) -> int | None:
    """A folder named by a form: blank is none; anything but an id is no folder of yours."""
    raw = (raw or "").strip()
    if not raw:
        return None
    return int(raw) if raw.isdigit() and len(raw) < 19 else 0  # 0: no row has it


@require_POST
def folder_create(request: HttpRequest) -> HttpResponse:
    try:
        folders.folder_create(
            owner=request.user,
            name=request.POST.get("name", ""),
            parent_id=_folder_id(request.POST.get("parent")),
        )
    except ApplicationError as exc:
        return _refused(request, exc)
    return _answer(request)


@require_POST
def folder_rename(request: HttpRequest, folder_id: int) -> HttpResponse:
    folder = folders.folder_get(user=request.user, folder_id=folder_id)
    try:
        folders.folder_change(folder=folder, name=request.POST.get("name", ""))
    except ApplicationError as exc:
        return _refused(request, exc)
    return _answer(request)


@require_POST
def folder_delete(request: HttpRequest, folder_id: int) -> HttpResponse:
    folders.folder_delete(folder=folders.folder_get(user=request.user, folder_id=folder_id))
    return _answer(request)


@require_POST
def conversation_folder(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Move to a folder: the row menu's "Move to", or a row dropped on a folder."""
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    try:
        folders.conversation_move(
            conversation=conversation, folder_id=_folder_id(request.POST.get("folder"))
        )
    except ApplicationError as exc:
        return _refused(request, exc)
    return _answer(request)


@require_POST
def conversation_pin(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    pinned = request.POST.get("pinned", "1") not in ("0", "false", "")
    pins.conversation_pin(conversation=conversation, pinned=pinned)
    return _answer(request)


@require_POST
def conversation_tags(request: HttpRequest, conversation_id: int) -> HttpResponse:
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    names = tags.tags_parse(request.POST.get("tags", ""))
    try:
        tags.conversation_set_tags(conversation=conversation, names=names)
    except ApplicationError as exc:
        return _refused(request, exc)
    return _answer(request)
