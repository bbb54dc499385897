"""What the OpenAPI document says beyond the declarations of the operations: the API's
description, the event stream's protocol, and what each error status means."""

from __future__ import annotations

from typing import Any

from conversations.api.schemas import Error

__all__ = ["API_DESCRIPTION", "ERROR_RESPONSES", "EVENTS_DESCRIPTION", "errors"]

API_DESCRIPTION = (
    "Conversations with tool-using agents, over JSON and Server-Sent Events. Authenticate "
    "with a personal API token (`Authorization: Bearer <token>`, created on "
    "/settings/tokens/ or with `manage.py create_api_token`) or a browser session (unsafe "
    "methods then need the `X-CSRFToken` header). Every client is rate limited per minute "
    "(429 with `Retry-After`)."
)

# Every authenticated operation may answer these.
AUTH_ERRORS = (401, 429)

ERROR_RESPONSES: dict[int, dict[str, Any]] = {
    400: {"description": "Invalid input; `fields` says what to fix."},
    401: {"description": "Missing, wrong or revoked credentials."},
    404: {"description": "No such object among yours."},
    409: {"description": "Already decided, the run has ended, or a run is still active."},
    413: {"description": "The message or request body is over the limit."},
    429: {
        "description": "Rate limited, or locked out after failed API tokens.",
        "headers": {
            "Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer"}}
        },
    },
}


def errors(*statuses: int) -> dict[int, type[Error]]:
    """The error responses of an authenticated operation: ``statuses`` and 401, 429."""
    return {status: Error for status in sorted({*statuses, *AUTH_ERRORS})}


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
  (`""` if none), which replaces what the deltas assembled; `retryable: false` when
  retrying cannot help (the provider refused the API key or the request, its quota is
  spent, the conversation is too long for the model)
- `unanswered` also follows the `error` of a run interrupted by a crash, or of one no
  worker took
- `done` and `error` sent before they could be stored (the database restarts, its disk
  is full) carry `unsaved`: why, in plain words; a `saved` event `{run_id}` follows once
  they are stored (the stored event has no `unsaved`)
- `approval`: `{status:"requested", call_id, tool_name, tool_args, reason, request?}` when
  a tool call waits for your approval (`request`: what the call would send, e.g.
  `{method, url, body, credentials}` with the credentials' names only; answer with
  `POST /api/runs/{run_id}/approvals/{call_id}`;
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
- `title`: `{title}`, after a conversation's first `done` (only on a stream that stays
  open, `?follow=1`): the conversation's automatic title, made from the question by a
  model; never sent for a title the user gave (`title_by_user`)
- `handover`: `{message, handovers}`: the worker writing the run stopped (a restart) and
  handed it back; another worker goes on from its last completed step. The answer so far
  is taken back (empty it, as after an `answer reset`) and is written again; the run's
  `done` follows as usual

A server that restarts ends open streams cleanly: reconnect (to any server) with
`Last-Event-ID`, as EventSource does, and the stream goes on where it stopped.

Every event's data also carries `branch: {run_id, parent_run_id}`: the run it belongs to
and the run that one continues (the conversation is a tree of runs: see `Versions`). The
replay holds the selected branch's events (`?branch=all`: every branch's).

Resume with the `Last-Event-ID` header (browsers' EventSource sends it) or `?after=N`:
every event after that id is replayed from the durable log, then live events follow,
none lost or repeated. Without either, the stream starts at the first event of the
latest run. Comment lines (`: heartbeat`) keep idle connections open every 15 s. The
stream ends after a run's `done` or `error` unless `?follow=1`.
"""
