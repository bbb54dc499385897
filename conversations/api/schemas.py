"""The API's request and response bodies: they validate requests, shape answers and make
the OpenAPI document (:mod:`conversations.api.api`).

Request bodies refuse unknown fields (``extra="forbid"``); strings and booleans are strict
(``"yes"`` is not true, ``5`` is not a title). Choices come from the models' own.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from django.utils.translation import gettext as _
from ninja import Body, Schema
from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)
from pydantic_core import PydanticCustomError, PydanticUndefined

from conversations.http.params import DB_ID_MAX
from conversations.models import AgentMode, Message, Run
from conversations.organise.tags import TAG_CHARS, TAGS_MAX
from conversations.transfer.exporting import EXPORT_FORMAT, EXPORT_VERSION

MODE_DOC = (
    "How runs work: react (one agent loop), plan (a plan of steps run in parallel, judged "
    "and replanned), auto (one quick model call decides per message)."
)

FOLDER_DOC = "The id of a folder of yours (GET /api/folders; another user's answers 404)."
TAGS_DOC = (
    f"Tag names: trimmed, each once whatever its case, at most {TAGS_MAX} of at most "
    f"{TAG_CHARS} characters (else 400 naming tags)."
)
PINNED_DOC = "Pinned conversations come first in the sidebar."

Mode = Literal[tuple(AgentMode.values)]  # type: ignore[valid-type]
Role = Literal[tuple(Message.Role.values)]  # type: ignore[valid-type]
Kind = Literal[tuple(Message.Kind.values)]  # type: ignore[valid-type]
RunStatus = Literal[tuple(Run.Status.values)]  # type: ignore[valid-type]


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise PydanticCustomError(
            "model_id", _("Must be an id."), {"headline": _("'model' must be a model id.")}
        )
    return value


# A row's id in a body: past 64 bits it could be no row's (and the database would fail on it).
DbId = Annotated[StrictInt, Field(ge=1, le=DB_ID_MAX)]
# A model id from GET /api/models (a string of digits is read as one; true is not one).
ModelId = Annotated[int, BeforeValidator(_not_a_bool)]
# "" asks for the default, as no value does.
OptionalMode = Annotated[Mode | None, BeforeValidator(lambda value: value or None)]


class Forbid(Schema):
    model_config = ConfigDict(extra="forbid")


def _optional_body(schema: type[Schema]) -> Any:
    """A body that may be left out: no body is ``schema``'s defaults."""
    return Annotated[schema, Body(PydanticUndefined, default_factory=schema)]


# ----------------------------------------------------------------------------- errors


class Error(Schema):
    """Every error: a message, and messages per request field for bad input."""

    error: str = Field(description="A message safe to show to a person.")
    fields: dict[str, list[str]] = Field(
        default_factory=dict, description="Messages per request field (400 and 413 only)."
    )


# ---------------------------------------------------------------------------- requests


SYSTEM_PROMPT_DOC = (
    "What the agent is told in this conversation, after the model's default prompt and "
    "your instructions (GET/PATCH /api/me/settings)."
)
TOOLS_DOC = (
    "The names of the tools offered in this conversation, from GET /api/tools; null: "
    "every tool you may use."
)


class ChatParams(Forbid):
    """Sampling for one conversation, each within its model's range (GET /api/models:
    `params`); absent or null: the model's own."""

    temperature: StrictFloat | None = None
    top_p: StrictFloat | None = None
    max_tokens: StrictInt | None = None


class ConversationCreate(Forbid):
    title: StrictStr | None = Field(None, max_length=200)
    model: ModelId | None = Field(
        None, description="A model id from GET /api/models; default: the site default."
    )
    mode: OptionalMode = Field(None, description=MODE_DOC + " Default: react.")
    system_prompt: StrictStr | None = Field(None, description=SYSTEM_PROMPT_DOC)
    params: ChatParams | None = None
    tools: list[StrictStr] | None = Field(None, description=TOOLS_DOC)
    preset: DbId | None = Field(
        None,
        description="Start from this preset (GET /api/presets): its model, mode, system "
        "prompt, parameters, tools and knowledge bases, unless given here too.",
    )
    folder: StrictInt | None = Field(None, description=FOLDER_DOC)
    tags: list[StrictStr] | None = Field(None, description=TAGS_DOC)
    pinned: StrictBool = Field(False, description=PINNED_DOC)


ConversationCreateBody = _optional_body(ConversationCreate)


class ConversationChange(Forbid):
    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    title: StrictStr = Field(None, min_length=1, max_length=200)  # type: ignore[assignment]
    model: ModelId = None  # type: ignore[assignment]
    archived: StrictBool = None  # type: ignore[assignment]
    mode: Mode = Field(None, description=MODE_DOC)  # type: ignore[assignment]
    knowledge: list[DbId] = Field(  # type: ignore[assignment]
        None,
        description="Ids of the knowledge bases the agent searches in this conversation "
        "(yours or shared with you); [] detaches them all.",
    )
    system_prompt: StrictStr = Field(None, description=SYSTEM_PROMPT_DOC)  # type: ignore[assignment]
    params: ChatParams = Field(  # type: ignore[assignment]
        None,
        description="Merged into the conversation's: a parameter given null goes back to "
        "the model's own.",
    )
    tools: list[StrictStr] | None = Field(None, description=TOOLS_DOC)
    folder: StrictInt | None = Field(None, description=FOLDER_DOC + " null: out of any folder.")
    tags: list[StrictStr] = Field(None, description=TAGS_DOC + " [] removes them all.")  # type: ignore[assignment]
    pinned: StrictBool = Field(None, description=PINNED_DOC)  # type: ignore[assignment]

    @model_validator(mode="before")
    @classmethod
    def _something(cls, data: Any) -> Any:
        if data == {}:
            fields = (
                "title, model, mode, archived, knowledge, system_prompt, params, tools, "
                "folder, tags or pinned"
            )
            raise PydanticCustomError(
                "nothing_to_change",
                _("Send at least one of: %(fields)s.") % {"fields": fields},
                {"headline": _("Nothing to change: send %(fields)s.") % {"fields": fields}},
            )
        return data


class MessageNew(Forbid):
    content: StrictStr = Field(min_length=1)
    files: list[StrictInt] | None = Field(
        None,
        description="Ids of your files (POST /api/files) to attach, in order. An image needs "
        "a model with vision; files go with a new question, not a follow-up (409).",
    )
    mode: OptionalMode = Field(
        None,
        description="This message's run only (default: the conversation's mode); ignored "
        "for a follow-up.",
    )


class QuestionEdit(Forbid):
    content: StrictStr = Field(min_length=1)


class ResumeNote(Forbid):
    content: StrictStr | None = Field(None, description="A note for the agent (optional).")


ResumeNoteBody = _optional_body(ResumeNote)


class RegenerateChoice(Forbid):
    model: ModelId | None = None


RegenerateChoiceBody = _optional_body(RegenerateChoice)


class ApprovalDecision(Schema):
    approve: StrictBool


class ShareNew(Forbid):
    include_artifacts: StrictBool = False
    include_files: StrictBool = Field(
        default=False,
        description="Copy the files attached to the messages (up to the share size limits): "
        "the public page shows them and serves them from the share.",
    )


# --------------------------------------------------------------------------- responses


ShareNewBody = _optional_body(ShareNew)


class ModelRef(Schema):
    id: int
    name: str


class Conversation(Schema):
    id: int
    title: str
    title_by_user: bool = Field(
        description="Whether the user gave the title (on creating or renaming the "
        "conversation). False: the title is automatic, from the first message and then "
        "from a model after the first answer (a `title` event tells)."
    )
    model: ModelRef | None
    archived: bool
    mode: Mode = Field(description=MODE_DOC)
    folder: int | None = Field(description="The folder it is in (GET /api/folders); null: none.")
    tags: list[str] = Field(description="Its tags, by name (sorted, whatever the case).")
    pinned: bool = Field(description="Pinned: the sidebar lists it first.")
    created_at: datetime
    updated_at: datetime
    last_event_seq: int = Field(description="Last durable event id.")
    url: str
    events_url: str


class ConversationList(Schema):
    count: int
    offset: int
    limit: int
    conversations: list[Conversation]


class AttachedFile(Schema):
    id: int
    name: str
    size: int = Field(description="Bytes.")
    content_type: str
    url: str = Field(description="The file's bytes (GET, yours only).")


class MessageOut(Schema):
    id: int
    seq: int
    role: Role
    kind: Kind = Field(description="inject = a follow-up sent while a run was active.")
    content: str
    reasoning: str
    incomplete: bool = Field(
        description="An answer cut short: its run was stopped, failed or was interrupted "
        "while the answer streamed. The text is what was shown."
    )
    pinned: bool = Field(description="Pinned messages survive compaction.")
    usage: dict[str, Any]
    run_id: int | None
    delivered_at: datetime | None
    created_at: datetime
    files: list[AttachedFile] = Field(description="Files attached to the message, in order.")


class RunOut(Schema):
    id: int
    status: RunStatus = Field(
        description="incomplete: answered, but the answer was cut short (its stream broke "
        "off, it reached its length or time limit)."
    )
    trigger_message_id: int | None
    parent_run_id: int | None = Field(
        description="The run this one continues (null: it answers a first question). Runs "
        "with the same parent are alternatives: edits of the question (another trigger "
        "message) or regenerated answers (the same one)."
    )
    model_id: int | None = Field(
        description="The model asked for when the answer was regenerated with another model "
        "(null: the conversation's model)."
    )
    mode: Mode | None = Field(
        description="The mode asked for with the message (null: the conversation's mode when "
        "the run started)."
    )
    iterations: int
    usage: dict[str, Any] = Field(
        description="prompt_tokens, completion_tokens, total_tokens; for a priced model also "
        'cost (a decimal string, e.g. "0.006000", at the prices when the run ended) and '
        "currency (ISO 4217)."
    )
    elapsed: float | None = Field(description="Seconds.")
    error: str
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class Versions(Schema):
    """The alternatives at a run's fork, for `< 2/3 >` controls: `ids` are question message
    ids (`question_versions`: the question and its edits) or run ids (`answer_versions`:
    the answer and its regenerations); `index` is this run's, 0-based. Select another with
    `POST /api/messages/{id}/select` or `POST /api/runs/{id}/select`."""

    ids: list[int | None] = Field(description="null: a run without a question message.")
    index: int
    count: int


class BranchRun(RunOut):
    selected: bool = Field(description="On the branch the user is on.")
    question_versions: Versions
    answer_versions: Versions


class KnowledgeRef(Schema):
    id: int
    name: str


class ConversationDetail(Conversation):
    knowledge: list[KnowledgeRef] = Field(
        description="The knowledge bases the agent searches in this conversation."
    )
    system_prompt: str = Field(description=SYSTEM_PROMPT_DOC)
    params: dict[str, float | int] = Field(
        description="The conversation's own sampling parameters (temperature, top_p, "
        "max_tokens); one absent is the model's own."
    )
    tools: list[str] | None = Field(description=TOOLS_DOC)
    messages: list[MessageOut] = Field(
        description="The selected branch's messages (every message with `?branch=all`)."
    )
    runs: list[BranchRun] = Field(
        description="The selected branch's runs, first to last (every run with `?branch=all`)."
    )
    active_run_id: int | None
    compaction_summaries: list[dict[str, Any]] = Field(
        description="Summaries that replaced older messages in the model's context (the "
        "messages themselves are kept)."
    )


class MessagePosted(Schema):
    message_id: int
    run_id: int
    injected: bool = Field(
        description="true: delivered to the run already active; false: a new run."
    )
    run_status: RunStatus
    events_url: str


class QuestionEdited(Schema):
    message_id: int
    run_id: int
    run_status: RunStatus
    events_url: str


class ApprovalDecided(Schema):
    call_id: str
    status: Literal["approved", "denied"]


class ParamRangeOut(Schema):
    min: float
    max: float


class ModelOut(Schema):
    id: int
    name: str
    model_id: str
    provider: str
    is_default: bool
    abilities: dict[str, Any]
    context_window: int | None
    max_output_tokens: int | None
    roles: list[str]
    params: dict[str, ParamRangeOut] = Field(
        description="What a conversation with this model may set (PATCH "
        "/api/conversations/<id> `params`): temperature, top_p, max_tokens."
    )


class ModelList(Schema):
    models: list[ModelOut]


class Tool(Schema):
    name: str
    description: str
    requires_confirmation: bool = Field(
        description="Every call waits for your approval (the `approval` event). An MCP "
        "tool's: its server's switch, or the tool ticked on the server's row."
    )
    server: str | None = Field(
        description="The MCP server the tool comes from (null: the site's own)."
    )


class ToolList(Schema):
    tools: list[Tool]


class Share(Schema):
    id: int
    url: str = Field(description="The public page (anyone with it can read).")
    title: str
    conversation_id: int
    include_artifacts: bool
    include_files: bool = Field(description="The messages' attached files were copied.")
    active: bool = Field(description="false once revoked.")
    created_at: datetime
    revoked_at: datetime | None


class ShareList(Schema):
    shares: list[Share]


# ---------------------------------------------------------------------------- folders


class FolderCreate(Forbid):
    name: StrictStr = Field(description="Unique among its siblings, whatever the case.")
    parent: StrictInt | None = Field(
        None,
        description="A top-level folder of yours to put it in (folders nest one level "
        "deep: a sub-folder's id is refused); null: at the top level.",
    )


class FolderChange(Forbid):
    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    name: StrictStr = None  # type: ignore[assignment]
    parent: StrictInt | None = Field(
        None,
        description="Move it into this top-level folder (refused for a folder that has "
        "sub-folders); null: to the top level.",
    )

    @model_validator(mode="before")
    @classmethod
    def _something(cls, data: Any) -> Any:
        if data == {}:
            raise PydanticCustomError(
                "nothing_to_change",
                _("Send name, parent or both."),
                {"headline": _("Nothing to change: send name, parent or both.")},
            )
        return data


class FolderOut(Schema):
    id: int
    name: str
    parent: int | None = Field(description="The folder it is in; null: a top-level folder.")
    conversation_count: int = Field(description="Conversations directly in it, archived too.")
    created_at: datetime


# ------------------------------------------------------------------- export documents
# What GET .../export?format=json answers and POST /api/conversations/import reads (the
# importer checks a file itself, with messages that name what is wrong in it).


class ExportFile(Schema):
    name: str
    size: int
    content_type: str


class ExportSource(Schema):
    number: int = Field(description="The number the answer cites it by: [1], [2]…")
    where: str = Field(description="The document, its page and heading.")


class ExportMessage(Forbid):
    id: int
    seq: int = Field(ge=0)
    role: Role
    kind: Kind = None  # type: ignore[assignment]
    content: str
    reasoning: str = None  # type: ignore[assignment]
    incomplete: bool = None  # type: ignore[assignment]
    pinned: bool = None  # type: ignore[assignment]
    usage: dict[str, Any] = None  # type: ignore[assignment]
    created_at: datetime = None  # type: ignore[assignment]
    run_id: int | None = Field(
        None,
        description="The run the message belongs to (in a branch export: the run of the "
        "branch that shows it).",
    )
    files: list[ExportFile] = Field(
        None,  # type: ignore[arg-type]
        description="The attached files, as references (no bytes; an import leaves them out).",
    )


class ExportRun(Forbid):
    id: int
    parent_id: int | None = Field(None, description="The run this one continues.")
    trigger_message_id: int | None = Field(None, description="The question it answers.")
    status: RunStatus
    selected: bool = Field(
        None,  # type: ignore[arg-type]
        description="The run followed at its fork (at most one per parent).",
    )
    iterations: int = Field(None, ge=0)  # type: ignore[arg-type]
    usage: dict[str, Any] = None  # type: ignore[assignment]
    elapsed: float | None = None
    error: str = None  # type: ignore[assignment]
    model: str | None = Field(None, description="The model's name (not imported).")
    created_at: datetime = None  # type: ignore[assignment]
    sources: list[ExportSource] = Field(
        None,  # type: ignore[arg-type]
        description="The knowledge passages the answer may cite by number (not imported).",
    )


class ExportConversation(Schema):
    title: str = None  # type: ignore[assignment]
    model: str | None = None
    created_at: datetime = None  # type: ignore[assignment]


class ExportDocument(Forbid):
    format: Literal[EXPORT_FORMAT]  # type: ignore[valid-type]
    version: Literal[EXPORT_VERSION]  # type: ignore[valid-type]
    scope: Literal["branch", "tree"] = None  # type: ignore[assignment]
    exported_at: datetime = None  # type: ignore[assignment]
    conversation: ExportConversation = None  # type: ignore[assignment]
    messages: list[ExportMessage]
    runs: list[ExportRun]


# ------------------------------------------------------------------------------ files


class FileUploaded(Schema):
    """What POST /api/files answers."""

    id: int
    name: str = Field(description="The uploaded name, sanitised (no path, no control characters).")
    size: int = Field(description="Bytes.")
    content_type: str = Field(
        description="From the content, never from the name or the request (text types "
        "only: from the name's extension)."
    )


class FileDetail(FileUploaded):
    kind: Literal["text", "pdf", "docx", "image"]
    sha256: str
    pages: int = Field(description="A PDF's pages (0 for other kinds).")
    text_chars: int = Field(description="Characters of text extracted (0 for images).")
    created_at: datetime


# -------------------------------------------------------------------------- knowledge


class KnowledgeBaseCreate(Forbid):
    name: str = Field(max_length=200)
    description: str = Field("", max_length=10_000)


class KnowledgeBaseOut(Schema):
    """A knowledge base you can read: yours, or shared with you (``read_only``)."""

    id: int
    name: str
    description: str
    owner: str = Field(description="The owner's username.")
    read_only: bool = Field(description="Shared with you: you can search it, not change it.")
    shared: bool = Field(description="Shared with groups or with everyone (by an admin).")
    document_count: int
    created_at: datetime


class KnowledgeDocumentFromUrl(Forbid):
    url: str = Field(max_length=2000, description="An http(s) page or file to fetch.")


class KnowledgeDocumentAdded(Schema):
    id: int
    name: str
    status: Literal["queued", "indexing", "ready", "failed"]


class KnowledgeDocumentOut(KnowledgeDocumentAdded):
    error: str = Field(
        description="Why indexing failed; for a ready document, why it has no vectors "
        "although an embedding model is enabled ('' otherwise)."
    )
    source_url: str = Field(description="The URL it was fetched from ('' for an upload).")
    file_id: int
    chunk_count: int
    vectors: bool = Field(
        description="Its passages have vectors of the enabled embedding model, so searches "
        "rank them by meaning as well as by words."
    )
    created_at: datetime
    indexed_at: datetime | None


class KnowledgeHit(Schema):
    chunk_id: int
    document_id: int
    document_name: str
    page: int | None = Field(description="1-based page of a PDF; null for other documents.")
    heading: str = Field(description="The headings the passage sits under, 'A › B'.")
    text: str
    score: float = Field(description="Higher is better; comparable within one search only.")


class KnowledgeSearchResults(Schema):
    query: str
    results: list[KnowledgeHit]


# ---------------------------------------------------------------------- your settings


class UserSettingsOut(Schema):
    instructions: str = Field(
        description="Told to the agent in every conversation, after the model's default "
        "prompt and before the conversation's own."
    )
    language: str = Field(
        description="The interface's language and the one the agent answers in: en, "
        "zh-hans or ja; empty: from the browser's Accept-Language."
    )
    timezone: str = Field(
        description="An IANA zone name (the agent's clock, dates on the pages); empty: the "
        "server's."
    )
    theme: Literal["system", "light", "dark"]


class UserSettingsChange(Forbid):
    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    instructions: StrictStr = None  # type: ignore[assignment]
    language: StrictStr = None  # type: ignore[assignment]
    timezone: StrictStr = None  # type: ignore[assignment]
    theme: StrictStr = None  # type: ignore[assignment]

    @model_validator(mode="before")
    @classmethod
    def _something(cls, data: Any) -> Any:
        if data == {}:
            fields = "instructions, language, timezone or theme"
            raise PydanticCustomError(
                "nothing_to_change",
                _("Send at least one of: %(fields)s.") % {"fields": fields},
                {"headline": _("Nothing to change: send %(fields)s.") % {"fields": fields}},
            )
        return data


# ------------------------------------------------------------------------------ usage


class UsageCost(Schema):
    amount: str = Field(description='A decimal string with 6 places, e.g. "0.012000".')
    currency: str = Field(description="ISO 4217 code, e.g. USD.")


class UsageFigures(Schema):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    runs: int
    cost: list[UsageCost] = Field(
        description="One amount per currency the models used are priced in; [] when none "
        "was priced (tokens of an unpriced model cost nothing known)."
    )


class UsageDay(UsageFigures):
    day: date = Field(description="In the site's time zone.")


class UsageModel(UsageFigures):
    model_id: int | None = Field(description="null: a model deleted since.")
    name: str
    provider: str


class UsageQuota(Schema):
    limit: int | None = Field(description="Tokens a day (null: no limit).")
    used_today: int
    left: int | None = Field(description="Tokens left today (null: no limit).")
    resets_at: datetime = Field(
        description="The next midnight in the site's time zone, when the count starts again."
    )


class UsageReport(Schema):
    """Your tokens and their cost over the last `days` days (today included)."""

    days: Literal[7, 30, 90]
    since: date = Field(description="The period's first day.")
    until: date = Field(description="Today.")
    total: UsageFigures
    by_day: list[UsageDay] = Field(description="Newest first; days without usage are left out.")
    by_model: list[UsageModel] = Field(description="Most tokens first.")
    quota: UsageQuota


# --------------------------------------------------------------------------- presets

PRESET_TOOLS_DOC = "Tool names offered in its chats (GET /api/tools); null: every tool."


class PresetFields(Forbid):
    description: StrictStr = Field(None, max_length=300)  # type: ignore[assignment]
    model: ModelId | None = Field(None, description="A model id; null: the site default.")
    system_prompt: StrictStr = None  # type: ignore[assignment]
    tools: list[StrictStr] | None = Field(None, description=PRESET_TOOLS_DOC)
    knowledge: list[DbId] = Field(  # type: ignore[assignment]
        None, description="Ids of knowledge bases you may read."
    )
    params: ChatParams = None  # type: ignore[assignment]
    mode: Mode = Field(None, description=MODE_DOC)  # type: ignore[assignment]
    starters: list[StrictStr] = Field(  # type: ignore[assignment]
        None, max_length=4, description="Up to four starter prompts."
    )
    groups: list[DbId] = Field(  # type: ignore[assignment]
        None, description="Ids of groups you are in, to share the preset with (read-only)."
    )


class PresetNew(PresetFields):
    name: StrictStr = Field(min_length=1, max_length=100)


class PresetChange(PresetFields):
    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    name: StrictStr = Field(None, min_length=1, max_length=100)  # type: ignore[assignment]


class GroupRef(Schema):
    id: int
    name: str


class PresetOut(Schema):
    id: int
    name: str
    description: str
    owner: str | None = Field(description="Its owner's username; null: an admin's, for everyone.")
    read_only: bool = Field(description="true: shared with you; only its owner changes it.")
    model: ModelRef | None
    system_prompt: str
    tools: list[str] | None = Field(description=PRESET_TOOLS_DOC)
    knowledge: list[KnowledgeRef]
    params: dict[str, float | int]
    mode: Mode = Field(description=MODE_DOC)
    starters: list[str]
    groups: list[GroupRef]
    created_at: datetime
    updated_at: datetime


class PresetList(Schema):
    presets: list[PresetOut]
