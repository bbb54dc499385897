"""The API's path, query and header parameters: their types validate and document them
(each with its default: a view's parameter repeats it).

Query strings keep the lenient readings the API always had (``archived=true`` is ``1``,
an unknown ``branch`` is the selected one, a blank number is its default); numbers go
through :func:`conversations.http.params.whole_number`, so a number out of range is the
same 400 everywhere, with the same message.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ninja import Header, Path, Query
from pydantic import BeforeValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from conversations.http.params import DB_ID_MAX, whole_number
from core.errors import ApplicationError

__all__ = [
    "AfterEvent",
    "Archived",
    "Branch",
    "CallId",
    "ConversationId",
    "DocumentId",
    "ExportFormat",
    "FileId",
    "Follow",
    "KnowledgeBaseId",
    "LastEventId",
    "MessageId",
    "RunId",
    "SearchText",
    "ShareId",
    "Tree",
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
