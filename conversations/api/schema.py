"""The OpenAPI 3.1 description of the JSON API, served at ``/api/schema``.

Kept as a plain dict next to the views it describes; ``tests/api`` checks that every
route in ``conversations.api_urls`` is documented, so the two cannot drift silently.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from conversations.api.openapi_parts import error_response, id_param, json_body, json_response, ref
from conversations.api.schema_sharing import sharing_paths
from conversations.api.views import LIST_LIMIT_MAX, LIST_OFFSET_MAX
from core.converters import DB_ID_MAX

__all__ = ["openapi_document", "schema_view"]

_NULLABLE_INT = {"type": ["integer", "null"]}
_NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}
_TIME = {"type": "string", "format": "date-time"}
# A larger id or event number cannot exist (a 64-bit column): 404 in a path, 400 elsewhere.
_EVENT_ID = {"type": "integer", "minimum": 0, "maximum": DB_ID_MAX}


_MODE = {
    "enum": ["react", "plan", "auto"],
    "description": "How runs work: react (one agent loop), plan (a plan of steps run in "
    "parallel, judged and replanned), auto (one quick model call decides per message).",
}
_BRANCH_PARAM = {
    "name": "branch",
    "in": "query",
    "schema": {"enum": ["selected", "all"]},
    "description": "selected (default): the branch the user is on; all: every branch.",
}


SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {"type": "string", "description": "A message safe to show to a person."},
            "fields": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
                "description": "Messages per request field (400 and 413 only).",
            },
        },
    },
    "ModelRef": {
        "type": ["object", "null"],
        "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
    },
    "Conversation": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "title": {"type": "string"},
            "model": ref("ModelRef"),
            "archived": {"type": "boolean"},
            "mode": _MODE,
            "created_at": _TIME,
            "updated_at": _TIME,
            "last_event_seq": {"type": "integer", "description": "Last durable event id."},
            "url": {"type": "string"},
            "events_url": {"type": "string"},
        },
    },
    "ConversationList": {
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "offset": {"type": "integer"},
            "limit": {"type": "integer"},
            "conversations": {"type": "array", "items": ref("Conversation")},
        },
    },
    "Message": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "seq": {"type": "integer"},
            "role": {"enum": ["user", "assistant", "system"]},
            "kind": {
                "enum": ["chat", "inject"],
                "description": "inject = a follow-up sent while a run was active.",
            },
            "content": {"type": "string"},
            "reasoning": {"type": "string"},
            "incomplete": {
                "type": "boolean",
                "description": "An answer cut short: its run was stopped, failed or was "
                "interrupted while the answer streamed. The text is what was shown.",
            },
            "pinned": {"type": "boolean", "description": "Pinned messages survive compaction."},
            "usage": {"type": "object"},
            "run_id": _NULLABLE_INT,
            "delivered_at": _NULLABLE_TIME,
            "created_at": _TIME,
        },
    },
    "Run": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "status": {
                "enum": [
                    "queued",
                    "running",
                    "succeeded",
                    "failed",
                    "cancelled",
                    "paused",
                    "incomplete",
                ],
                "description": "incomplete: answered, but the answer was cut short (its "
                "stream broke off, it reached its length or time limit).",
            },
            "trigger_message_id": _NULLABLE_INT,
            "parent_run_id": {
                "type": ["integer", "null"],
                "description": "The run this one continues (null: it answers a first "
                "question). Runs with the same parent are alternatives: edits of the "
                "question (another trigger message) or regenerated answers (the same one).",
            },
            "model_id": {
                "type": ["integer", "null"],
                "description": "The model asked for when the answer was regenerated with "
                "another model (null: the conversation's model).",
            },
            "mode": {
                "enum": ["react", "plan", "auto", None],
                "description": "The mode asked for with the message (null: the "
                "conversation's mode when the run started).",
            },
            "iterations": {"type": "integer"},
            "usage": {"type": "object"},
            "elapsed": {"type": ["number", "null"], "description": "Seconds."},
            "error": {"type": "string"},
            "cancel_requested": {"type": "boolean"},
            "created_at": _TIME,
            "started_at": _NULLABLE_TIME,
            "finished_at": _NULLABLE_TIME,
        },
    },
    "ConversationDetail": {
        "allOf": [
            ref("Conversation"),
            {
                "type": "object",
                "properties": {
                    "messages": {
                        "type": "array",
                        "items": ref("Message"),
                        "description": "The selected branch's messages (every message "
                        "with `?branch=all`).",
                    },
                    "runs": {
                        "type": "array",
                        "items": {
                            "allOf": [
                                ref("Run"),
                                {
                                    "type": "object",
                                    "properties": {
                                        "selected": {
                                            "type": "boolean",
                                            "description": "On the branch the user is on.",
                                        },
                                        "question_versions": ref("Versions"),
                                        "answer_versions": ref("Versions"),
                                    },
                                },
                            ]
                        },
                        "description": "The selected branch's runs, first to last (every "
                        "run with `?branch=all`).",
                    },
                    "active_run_id": _NULLABLE_INT,
                    "compaction_summaries": {
                        "type": "array",
                        "items": {"type": "object"},
                        "description": "Summaries that replaced older messages in the "
                        "model's context (the messages themselves are kept).",
                    },
                },
            },
        ]
    },
    "Versions": {
        "type": "object",
        "description": "The alternatives at a run's fork, for `< 2/3 >` controls: `ids` "
        "are question message ids (`question_versions`: the question and its edits) or "
        "run ids (`answer_versions`: the answer and its regenerations); `index` is this "
        "run's, 0-based. Select another with `POST /api/messages/{id}/select` or "
        "`POST /api/runs/{id}/select`.",
        "properties": {
            "ids": {"type": "array", "items": {"type": "integer"}},
            "index": {"type": "integer"},
            "count": {"type": "integer"},
        },
    },
    "MessagePosted": {
        "type": "object",
        "required": ["message_id", "run_id", "injected"],
        "properties": {
            "message_id": {"type": "integer"},
            "run_id": {"type": "integer"},
            "injected": {
                "type": "boolean",
                "description": "true: delivered to the run already active; false: a new run.",
            },
            "run_status": {"type": "string"},
            "events_url": {"type": "string"},
        },
    },
    "Model": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "model_id": {"type": "string"},
            "provider": {"type": "string"},
            "is_default": {"type": "boolean"},
            "abilities": {"type": "object"},
            "context_window": _NULLABLE_INT,
            "max_output_tokens": _NULLABLE_INT,
            "roles": {"type": "array", "items": {"type": "string"}},
        },
    },
    "Tool": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string"},
            "requires_confirmation": {
                "type": "boolean",
                "description": "Every call waits for your approval (the `approval` "
                "event). An MCP tool's: its server's switch, or the tool ticked on the "
                "server's row.",
            },
            "server": {
                "type": ["string", "null"],
                "description": "The MCP server the tool comes from (null: the site's own).",
            },
        },
    },
}

EVENTS_DESCRIPTION = """\
Server-Sent Events (`text/event-stream`). Each event has `id:` (the conversation-wide
sequence number), `event:` (the protocol channel) and `data:` (the JSON payload):

- `step`: `{type:"thinking", status:"start", iteration}`,
  `{type:"thinking", status:"delta", iteration, content}` (the step's thought as it streams),
  `{type:"thinking", status:"done", iteration, reasoning}` (the whole thought),
  `{type:"iteration", status:"start", iteration, tool_name, tool_args}`,
  `{type:"iteration", status:"done", iteration, tool_name, observation, error, iter_elapsed}`,
  `{type:"answer", status:"start"}` (an answer not streamed by the loop follows)
- `answer`: `{status:"start"}`, `{status:"delta", content}`, `{status:"done"}`, and
  `{status:"reset"}`: the text since the last `start` was a step's thought, not the
  answer (tool calls followed): empty the answer; the step's `thinking done` carries it.
  The answer streams from the model's own call, so text can arrive before tool calls.
- `compact`: `{original_messages, kept_messages}`
- `phase`: `{phase:"selecting_tools", total_tools}`; in plan mode `{phase:"routed", mode}`
  (what Auto chose), `{phase:"planning", round}`, `{phase:"executing", round, plan:
  {steps: [{id, task, dependencies, tool_hint, model_hint}]}}`, `{phase:"analyzing",
  round}`, `{phase:"analyzed", round, achieved, confidence, reasoning}`,
  `{phase:"replanning", round, reason}` and `{phase:"planning_failed", reason}` (the run
  goes on as one ReAct loop)
- `step_progress` (plan mode): `{step_id, round, event, task, model, elapsed, tokens}` with
  `event` one of `started`, `iteration` (`iteration`), `tool` (`status:"start"`,
  `tool_name`, `tool_args`, then `status:"done"`, `observation`, `error`, `iter_elapsed`),
  `completed` (`result`, `iterations`), `failed` (`error`), `skipped` (`reason`)
- `inject`: `{type:"inject", content}`
- `done`: `{status, answer, iterations, usage, elapsed}` (status `succeeded`, or
  `incomplete` with a `reason` when the answer was cut short, or `paused` with a `reason`
  when a loop guard stopped the run so you can step in: continue it with
  `POST /api/runs/{run_id}/resume`; a `succeeded` one may carry a `reason` too, e.g. when
  the answer could not be rewritten)
- `error`: `{message, status, answer}` (status `failed`, `cancelled`, or `incomplete`
  when a run reached its time limit mid-answer); `answer` is the partial answer kept
  (`""` if none), which replaces what the deltas assembled
- `unanswered` also follows the `error` of a run interrupted by a crash, or of one no
  worker took
- `done` and `error` sent before they could be stored (the database restarts, its disk
  is full) carry `unsaved`: why, in plain words; a `saved` event `{run_id}` follows once
  they are stored (the stored event has no `unsaved`)
- `approval`: `{status:"requested", call_id, tool_name, tool_args, reason}` when a tool
  call waits for your approval (answer with `POST /api/runs/{run_id}/approvals/{call_id}`;
  `call_id` is the request's own id, made by the server, not the model's tool call id),
  then `{status, call_id}` with `approved`, `denied` or `expired` (no answer in time)
- `followup`: `{run_id, messages: [{id, content, pinned}]}`, after a run's `done` or
  `error`: follow-ups that reached it too late (e.g. while it wrote its answer) became
  the questions of the new run `run_id`, whose events follow
- `unanswered`: `{messages: [{id, content, pinned}]}`, after a Stop's `error`: follow-ups
  the stopped run never took in stay in the conversation as ordinary messages, unanswered
- `resume`: `{resumed_run_id, tool_results}`, a run's first event when it continues a
  paused run (`POST /api/runs/{run_id}/resume`): the run it goes on from, and how many
  tool results of that run's trace the model sees again

Every event's data also carries `branch: {run_id, parent_run_id}`: the run it belongs to
and the run that one continues (the conversation is a tree of runs: see `Versions`). The
replay holds the selected branch's events (`?branch=all`: every branch's).

Resume with the `Last-Event-ID` header (browsers' EventSource sends it) or `?after=N`:
every event after that id is replayed from the durable log, then live events follow,
none lost or repeated. Without either, the stream starts at the first event of the
latest run. Comment lines (`: heartbeat`) keep idle connections open every 15 s. The
stream ends after a run's `done` or `error` unless `?follow=1`.
"""


def _paths() -> dict[str, Any]:

    auth_errors = {"401": error_response("Unauthorized"), "429": error_response("TooManyRequests")}
    conversation_id = id_param("conversation_id", "conversation")
    return {
        "/api/conversations": {
            "get": {
                "summary": "List your conversations (newest first)",
                "operationId": "listConversations",
                "parameters": [
                    {
                        "name": "q",
                        "in": "query",
                        "schema": {"type": "string"},
                        "description": "Search titles and message text.",
                    },
                    {"name": "archived", "in": "query", "schema": {"enum": ["0", "1"]}},
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {
                            "type": "integer",
                            "default": 100,
                            "minimum": 1,
                            "maximum": LIST_LIMIT_MAX,
                        },
                    },
                    {
                        "name": "offset",
                        "in": "query",
                        "schema": {
                            "type": "integer",
                            "default": 0,
                            "minimum": 0,
                            "maximum": LIST_OFFSET_MAX,
                        },
                    },
                ],  # fmt: skip
                "responses": {
                    "200": json_response(ref("ConversationList"), "Your conversations."),
                    "400": error_response("BadRequest"),
                    **auth_errors,
                },
            },
            "post": {
                "summary": "Create a conversation",
                "operationId": "createConversation",
                "requestBody": json_body(
                    {
                        "type": "object",
                        "properties": {
                            "title": {"type": "string", "maxLength": 200},
                            "model": {
                                "type": ["integer", "null"],
                                "description": "A model id from GET /api/models; "
                                "default: the site default.",
                            },
                            "mode": _MODE | {"default": "react"},
                        },
                        "additionalProperties": False,
                    },
                    required=False,
                ),
                "responses": {
                    "201": json_response(ref("ConversationDetail"), "Created."),
                    "400": error_response("BadRequest"),
                    "413": error_response("TooLarge"),
                    **auth_errors,
                },
            },
        },
        "/api/conversations/{conversation_id}": {
            "parameters": [conversation_id],
            "get": {
                "summary": "A conversation with its messages, runs and compaction summaries",
                "operationId": "getConversation",
                "parameters": [_BRANCH_PARAM],
                "responses": {
                    "200": json_response(ref("ConversationDetail"), "The conversation."),
                    "404": error_response("NotFound"),
                    **auth_errors,
                },
            },
            "patch": {
                "summary": "Rename, switch model or mode, archive or restore",
                "operationId": "updateConversation",
                "requestBody": json_body(
                    {
                        "type": "object",
                        "minProperties": 1,
                        "properties": {
                            "title": {"type": "string", "minLength": 1, "maxLength": 200},
                            "model": {"type": "integer"},
                            "archived": {"type": "boolean"},
                            "mode": _MODE,
                        },
                        "additionalProperties": False,
                    }
                ),
                "responses": {
                    "200": json_response(ref("ConversationDetail"), "Updated."),
                    "400": error_response("BadRequest"),
                    "404": error_response("NotFound"),
                    "413": error_response("TooLarge"),
                    **auth_errors,
                },
            },
            "delete": {
                "summary": "Delete a conversation (stops its active run)",
                "operationId": "deleteConversation",
                "responses": {
                    "204": {"description": "Deleted."},
                    "404": error_response("NotFound"),
                    **auth_errors,
                },
            },  # fmt: skip
        },
        "/api/conversations/{conversation_id}/messages": {
            "parameters": [conversation_id],
            "post": {
                "summary": "Send a message: starts a run, or joins the active one",
                "operationId": "postMessage",
                "description": "When a run is active the message is delivered to it as a "
                "follow-up (`injected: true`). Then read the run's events from "
                "`GET /api/conversations/{id}/events`.",
                "requestBody": json_body(
                    {
                        "type": "object",
                        "required": ["content"],
                        "properties": {
                            "content": {"type": "string", "minLength": 1},
                            "mode": _MODE
                            | {
                                "description": "This message's run only (default: the "
                                "conversation's mode); ignored for a follow-up."
                            },
                        },
                        "additionalProperties": False,
                    }
                ),
                "responses": {
                    "202": json_response(ref("MessagePosted"), "Accepted; the run works on it."),
                    "400": error_response("BadRequest"),
                    "404": error_response("NotFound"),
                    "413": error_response("TooLarge"),
                    **auth_errors,
                },
            },
        },
        "/api/conversations/{conversation_id}/events": {
            "parameters": [conversation_id],
            "get": {
                "summary": "Stream the conversation's events (Server-Sent Events)",
                "operationId": "streamEvents",
                "description": EVENTS_DESCRIPTION,
                "parameters": [
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "schema": _EVENT_ID,
                        "description": "Replay everything after this event id.",
                    },
                    {
                        "name": "after",
                        "in": "query",
                        "schema": _EVENT_ID,
                        "description": "Same as Last-Event-ID (the header wins).",
                    },
                    {
                        "name": "follow",
                        "in": "query",
                        "schema": {"enum": ["0", "1"]},
                        "description": "1: keep the stream open across runs.",
                    },
                    _BRANCH_PARAM,
                ],  # fmt: skip
                "responses": {
                    "200": {
                        "description": "An endless or run-long event stream.",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    "400": error_response("BadRequest"),
                    "404": error_response("NotFound"),
                    **auth_errors,
                },
            },
        },
        "/api/runs/{run_id}/cancel": {
            "parameters": [id_param("run_id", "run")],
            "post": {
                "summary": "Stop a run (ends its LLM request and tools at the next step)",
                "operationId": "cancelRun",
                "responses": {
                    "202": json_response(
                        ref("Run"), "Cancellation requested (or already finished)."
                    ),
                    "404": error_response("NotFound"),
                    **auth_errors,
                },
            },
        },
        "/api/runs/{run_id}/retry": {
            "parameters": [id_param("run_id", "run")],
            "post": {
                "summary": "Answer a failed, stopped or incomplete run's question again",
                "description": "The new run is an alternative beside the old one (see "
                "`regenerate`), returned, and streams on the conversation's events.",
                "operationId": "retryRun",
                "responses": {
                    "202": json_response(ref("Run"), "The new run, queued."),
                    "400": error_response("BadRequest"),
                    "404": error_response("NotFound"),
                    "409": error_response("Conflict"),
                    **auth_errors,
                },
            },
        },
        "/api/runs/{run_id}/resume": {
            "parameters": [id_param("run_id", "run")],
            "post": {
                "summary": "Continue a paused run from where it stopped, with an optional note",
                "description": "A run a loop guard paused (`status: paused`: the same tool "
                "error again and again, or turns without progress) goes on as a new run, "
                "its continuation (`parent_run_id` is the paused run): the model sees the "
                "paused run's tool calls and results as they were, then `content` (saved "
                "as a user message first) or, without one, a short request to continue. "
                "The new run's first event is `resume`. 409 when the run is not paused, "
                "cannot be resumed (paused in plan mode, which keeps no trace) or a run of "
                "the conversation is active; 400 for a note over the message limit.",
                "operationId": "resumeRun",
                "requestBody": json_body(
                    {
                        "type": "object",
                        "properties": {
                            "content": {
                                "type": ["string", "null"],
                                "description": "A note for the agent (optional).",
                            }
                        },
                        "additionalProperties": False,
                    },
                    required=False,
                ),
                "responses": {
                    "202": json_response(ref("Run"), "The new run, queued."),
                    "400": error_response("BadRequest"),
                    "404": error_response("NotFound"),
                    "409": error_response("Conflict"),
                    "413": error_response("TooLarge"),
                    **auth_errors,
                },
            },
        },
        "/api/runs/{run_id}/regenerate": {
            "parameters": [id_param("run_id", "run")],
            "post": {
                "summary": "A new answer to the run's question, beside it",
                "description": "From the same history, optionally by another model you may "
                "use. The new run becomes the selected branch. 409 while a run of the "
                "conversation is active.",
                "operationId": "regenerateRun",
                "requestBody": json_body(
                    {
                        "type": "object",
                        "properties": {"model": {"type": "integer"}},
                        "additionalProperties": False,
                    },
                    required=False,
                ),
                "responses": {
                    "202": json_response(ref("Run"), "The new run, queued."),
                    "400": error_response("BadRequest"),
                    "404": error_response("NotFound"),
                    "409": error_response("Conflict"),
                    **auth_errors,
                },
            },
        },
        "/api/runs/{run_id}/select": {
            "parameters": [id_param("run_id", "run")],
            "post": {
                "summary": "Switch to this answer among its alternatives",
                "description": "Below it, the branch last selected there is shown again. "
                "409 while a run of the conversation is active.",
                "operationId": "selectRun",
                "responses": {
                    "200": json_response(
                        ref("ConversationDetail"), "The conversation on its branch."
                    ),
                    "404": error_response("NotFound"),
                    "409": error_response("Conflict"),
                    **auth_errors,
                },
            },
        },
        "/api/messages/{message_id}/edit": {
            "parameters": [id_param("message_id", "message")],
            "post": {
                "summary": "Ask a question again as edited, as a new branch",
                "description": "The edited text is a new message beside the original (which "
                "stays, with its answers); a new run answers it from the history before it. "
                "409 while a run of the conversation is active.",
                "operationId": "editMessage",
                "requestBody": json_body(
                    {
                        "type": "object",
                        "required": ["content"],
                        "properties": {"content": {"type": "string", "minLength": 1}},
                        "additionalProperties": False,
                    }
                ),
                "responses": {
                    "202": json_response(ref("MessagePosted"), "The new question and its run."),
                    "400": error_response("BadRequest"),
                    "404": error_response("NotFound"),
                    "409": error_response("Conflict"),
                    "413": error_response("TooLarge"),
                    **auth_errors,
                },
            },
        },
        "/api/messages/{message_id}/select": {
            "parameters": [id_param("message_id", "message")],
            "post": {
                "summary": "Switch to this version of a question among its edits",
                "description": "With the answer last selected for it. 409 while a run of the "
                "conversation is active.",
                "operationId": "selectMessage",
                "responses": {
                    "200": json_response(
                        ref("ConversationDetail"), "The conversation on its branch."
                    ),
                    "400": error_response("BadRequest"),
                    "404": error_response("NotFound"),
                    "409": error_response("Conflict"),
                    **auth_errors,
                },
            },
        },
        "/api/runs/{run_id}/approvals/{call_id}": {
            "parameters": [
                id_param("run_id", "run"),
                {
                    "name": "call_id",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string"},
                    "description": "The `call_id` of the run's `approval` event.",
                },
            ],
            "post": {
                "summary": "Approve or deny a tool call waiting for your approval",
                "description": "The run resumes with the tool's result (approved) or with "
                "the refusal as the call's observation (denied).",
                "operationId": "decideApproval",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["approve"],
                                "properties": {"approve": {"type": "boolean"}},
                            }
                        }
                    },
                },
                "responses": {
                    "200": json_response(
                        {
                            "type": "object",
                            "properties": {
                                "call_id": {"type": "string"},
                                "status": {"type": "string", "enum": ["approved", "denied"]},
                            },
                        },
                        "Decided.",
                    ),
                    "400": error_response("BadRequest"),
                    "404": error_response("NotFound"),
                    "409": error_response("Conflict"),
                    **auth_errors,
                },
            },
        },
        "/api/messages/{message_id}/pin": {
            "parameters": [id_param("message_id", "message")],
            "post": {
                "summary": "Pin a message (kept verbatim when older context is summarised)",
                "operationId": "pinMessage",
                "responses": {
                    "200": json_response(ref("Message"), "Pinned."),
                    "404": error_response("NotFound"),
                    **auth_errors,
                },
            },
        },
        "/api/messages/{message_id}/unpin": {
            "parameters": [id_param("message_id", "message")],
            "post": {
                "summary": "Unpin a message",
                "operationId": "unpinMessage",
                "responses": {
                    "200": json_response(ref("Message"), "Unpinned."),
                    "404": error_response("NotFound"),
                    **auth_errors,
                },
            },
        },
        "/api/models": {
            "get": {
                "summary": "Models you may use",
                "operationId": "listModels",
                "responses": {
                    "200": json_response(
                        {
                            "type": "object",
                            "properties": {"models": {"type": "array", "items": ref("Model")}},
                        },
                        "Models.",
                    ),  # fmt: skip
                    **auth_errors,
                },
            },
        },
        "/api/tools": {
            "get": {
                "summary": "Tools your runs may use",
                "operationId": "listTools",
                "responses": {
                    "200": json_response(
                        {
                            "type": "object",
                            "properties": {"tools": {"type": "array", "items": ref("Tool")}},
                        },
                        "Tools.",
                    ),  # fmt: skip
                    **auth_errors,
                },
            },
        },
        "/api/schema": {
            "get": {
                "summary": "This document",
                "operationId": "getSchema",
                "security": [],
                "responses": {"200": {"description": "OpenAPI 3.1 JSON."}},
            },
        },
        **sharing_paths(),  # export, import and shared links
    }


def openapi_document() -> dict[str, Any]:
    """The whole OpenAPI 3.1 document."""
    error = ref("Error")
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "agentsite API",
            "version": "1",
            "description": "Conversations with tool-using agents, over JSON and "
            "Server-Sent Events. Authenticate with a personal API token "
            "(`Authorization: Bearer <token>`, created on /settings/tokens/ or with "
            "`manage.py create_api_token`) or a browser session (unsafe methods then need "
            "the `X-CSRFToken` header). Every client is rate limited per minute "
            "(429 with `Retry-After`).",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearerAuth": []}, {"sessionAuth": []}],
        "paths": _paths(),
        "components": {
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer"},
                "sessionAuth": {"type": "apiKey", "in": "cookie", "name": "sessionid"},
            },
            "schemas": SCHEMAS,
            "responses": {
                "BadRequest": json_response(error, "Invalid input; `fields` says what to fix."),
                "Unauthorized": json_response(error, "Missing, wrong or revoked credentials."),
                "NotFound": json_response(error, "No such object among yours."),
                "Conflict": json_response(
                    error, "Already decided, the run has ended, or a run is still active."
                ),
                "TooLarge": json_response(error, "The message or request body is over the limit."),
                "TooManyRequests": {
                    **json_response(error, "Rate limited, or locked out after failed API tokens."),
                    "headers": {
                        "Retry-After": {
                            "description": "Seconds to wait.",
                            "schema": {"type": "integer"},
                        }
                    },
                },
            },
        },
    }


def schema_view(request: HttpRequest) -> HttpResponse:
    """The OpenAPI document; public, like any API description."""
    return JsonResponse(openapi_document(), json_dumps_params={"indent": 2})


schema_view.login_required = False  # type: ignore[attr-defined]
