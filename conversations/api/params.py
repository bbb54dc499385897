"""The API's path, query and header parameters: their types validate and document them
(each with its default: a view's parameter repeats it).

Query strings keep the lenient readings the API always had (``archived=true`` is ``1``,
an unknown ``branch`` is the selected one, a blank number is its default); numbers go
through :func:`conversations.http.params.whole_number`, so a number out of range is the
same 400 everywhere, with the same message.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from django.utils.translation import gettext as _
from ninja import Header, Path, Query
from pydantic import BeforeValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from conversations.http.params import DB_ID_MAX, whole_number
from core.errors import ApplicationError
from llms.usage import DEFAULT_PERIOD, PERIODS, period_days

__all__ = [
    "AfterEvent",
    "Archived",
    "Branch",
    "CallId",
    "ConversationId",
    "DocumentId",
    "ExportFormat",
    "FileId",
    "FolderFilter",
    "FolderId",
    "Follow",
    "KnowledgeBaseId",
    "LastEventId",
    "MessageId",
    "PinnedFilter",
    "PresetId",
    "RunId",
    "SearchText",
    "ShareId",
    "TagFilter",
    "Tree",
    "UsageDays",
    "whole",
]


def _id(what: str) -> Any:
    """A database id in the path: the ``<id:...>`` converter refuses one past 64 bits (a
    404 before any view runs); an id of no row of the user's is a 404 too."""
    description = f"The {what}'s id (another user's id answers 404)."
    documented = {"type": "integer", "minimum": 1, "maximum": DB_ID_MAX}
    return Annotated[int, WithJsonSchema({**documented, "description": description}), Path(...)]


ConversationId = _id("conversation")
RunId = _id("run")
MessageId = _id("message")
ShareId = _id("shared link")
FileId = _id("file")
KnowledgeBaseId, DocumentId = _id("knowledge base"), _id("document")
FolderId = _id("folder")
PresetId = _id("preset")
CallId = Annotated[str, Path(description="The `call_id` of the run's `approval` event.")]


def whole(name: str, *, default: int | None, minimum: int = 0, maximum: int = DB_ID_MAX) -> Any:
    """A whole number from a query string or header, read by ``whole_number``: blank is
    ``default``, anything else out of ``[minimum, maximum]`` a 400 naming ``name``."""

    def read(raw: Any) -> int | None:
        if isinstance(raw, int) and not isinstance(raw, bool):
            raw = str(raw)
        elif raw is not None and not isinstance(raw, str):
            raw = "?"  # not a number: refused below
        bounds = {"minimum": minimum, "maximum": maximum}
        try:
            return whole_number(raw, name=name, default=default, **bounds)  # type: ignore[arg-type]
        except ApplicationError as exc:
            raise PydanticCustomError("whole_number", exc.message) from None

    documented = {"type": "integer", "minimum": minimum, "maximum": maximum}
    if default is not None:
        documented["default"] = default
    kind = int if default is not None else int | None
    return Annotated[kind, BeforeValidator(read), WithJsonSchema(documented)]


def _choice(default: str, **readings: str) -> BeforeValidator:
    """Read a query flag leniently: ``readings`` maps what clients send to a documented
    value, anything else is ``default``."""
    return BeforeValidator(lambda raw: readings.get(raw, default) if isinstance(raw, str) else raw)


def _flag(*truthy: str) -> BeforeValidator:
    return _choice("0", **dict.fromkeys(truthy, "1"))


SearchText = Annotated[str, Query("", description="Search titles and message text.")]
Archived = Annotated[Literal["0", "1"], _flag("1", "true"), Query("0")]
Branch = Annotated[
    Literal["selected", "all"],
    _choice("selected", all="all"),
    Query(
        "selected", description="selected (default): the branch the user is on; all: every branch."
    ),
]
AfterEvent = Annotated[
    whole("after", default=None),
    Query(None, description="Same as Last-Event-ID (the header wins)."),
]
LastEventId = Annotated[
    whole("Last-Event-ID", default=None),
    Header(None, alias="Last-Event-ID", description="Replay everything after this event id."),
]
Follow = Annotated[
    Literal["0", "1"],
    _flag("1", "true", "yes"),
    Query("0", description="1: keep the stream open across runs."),
]
# Listed "markdown" first: a wrong one is answered "must be markdown or json".
ExportFormat = Annotated[Literal["markdown", "json"], Query("json")]
Tree = Annotated[
    Literal["0", "1"],
    BeforeValidator(
        lambda raw: {"true": "1", "false": "0"}.get(raw, raw) if isinstance(raw, str) else raw
    ),
    Query("0", description="1: every branch (JSON only)."),
]


def _folder_filter(raw: Any) -> str:
    """Blank (any folder), ``none``, or a folder's id as digits; else a 400 naming it."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str):
        raw = "?"  # not a folder: refused below
    if raw.strip().lower() in ("", "none"):
        return raw.strip().lower()
    try:
        return str(whole_number(raw, name="folder", default=0, minimum=1))
    except ApplicationError:
        message = _("'folder' must be a folder's id or none.")
        raise PydanticCustomError("whole_number", message) from None


TagFilter = Annotated[
    str, Query("", description="Only the conversations with this tag (its name, in any case).")
]
FolderFilter = Annotated[
    str,
    BeforeValidator(_folder_filter),
    WithJsonSchema({"type": "string", "pattern": "^(none|[1-9][0-9]*)?$"}),
    Query(
        "",
        description="A folder's id: only the conversations directly in it (another user's "
        "folder answers 404); none: only those in no folder.",
    ),
]
PinnedFilter = Annotated[
    Literal["", "0", "1"],
    _choice("", **{"1": "1", "true": "1", "0": "0", "false": "0"}),
    Query("", description="1 (or true): only pinned conversations; 0 (or false): only unpinned."),
]


def _period(raw: Any) -> int:
    """7, 30 or 90 (blank: the default); anything else is refused naming ``days``."""
    try:
        return period_days(raw)
    except ApplicationError as exc:
        raise PydanticCustomError(
            "period", exc.extra["days"][0], {"headline": exc.message}
        ) from None


UsageDays = Annotated[
    int,
    BeforeValidator(_period),
    WithJsonSchema({"type": "integer", "enum": list(PERIODS), "default": DEFAULT_PERIOD}),
    Query(DEFAULT_PERIOD, description="The period: the last 7, 30 or 90 days, today included."),
]
