"""OpenAPI paths of export, import and shared links (merged into ``schema._paths()``).

The schemas are inline so that the shared document needs no other change; errors use the
document's shared responses.
"""

from __future__ import annotations

from typing import Any

from conversations.api.openapi_parts import error_response, id_param, json_body, json_response, ref
from conversations.models import Message, Run
from conversations.transfer.exporting import EXPORT_FORMAT, EXPORT_VERSION

__all__ = ["EXPORT_DOCUMENT", "SHARE", "sharing_paths"]

_TIME = {"type": "string", "format": "date-time"}
_NULLABLE_INT = {"type": ["integer", "null"]}

_EXPORT_MESSAGE = {
    "type": "object",
    "required": ["id", "seq", "role", "content"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "integer"},
        "seq": {"type": "integer", "minimum": 0},
        "role": {"enum": Message.Role.values},
        "kind": {"enum": Message.Kind.values},
        "content": {"type": "string"},
        "reasoning": {"type": "string"},
        "incomplete": {"type": "boolean"},
        "pinned": {"type": "boolean"},
        "usage": {"type": "object"},
        "created_at": _TIME,
        "run_id": {
            **_NULLABLE_INT,
            "description": "The run the message belongs to (in a branch export: the run "
            "of the branch that shows it).",
        },
    },
}
_EXPORT_RUN = {
    "type": "object",
    "required": ["id", "status"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "integer"},
        "parent_id": {**_NULLABLE_INT, "description": "The run this one continues."},
        "trigger_message_id": {**_NULLABLE_INT, "description": "The question it answers."},
        "status": {"enum": Run.Status.values},
        "selected": {
            "type": "boolean",
            "description": "The run followed at its fork (at most one per parent).",
        },
        "iterations": {"type": "integer", "minimum": 0},
        "usage": {"type": "object"},
        "elapsed": {"type": ["number", "null"]},
        "error": {"type": "string"},
        "model": {"type": ["string", "null"], "description": "The model's name (not imported)."},
        "created_at": _TIME,
    },
}
EXPORT_DOCUMENT: dict[str, Any] = {
    "type": "object",
    "required": ["format", "version", "messages", "runs"],
    "additionalProperties": False,
    "properties": {
        "format": {"const": EXPORT_FORMAT},
        "version": {"const": EXPORT_VERSION},
        "scope": {"enum": ["branch", "tree"]},
        "exported_at": _TIME,
        "conversation": {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "model": {"type": ["string", "null"]},
                "created_at": _TIME,
            },
        },
        "messages": {"type": "array", "items": _EXPORT_MESSAGE},
        "runs": {"type": "array", "items": _EXPORT_RUN},
    },
}
SHARE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "url": {"type": "string", "description": "The public page (anyone with it can read)."},
        "title": {"type": "string"},
        "conversation_id": {"type": "integer"},
        "include_artifacts": {"type": "boolean"},
        "active": {"type": "boolean", "description": "false once revoked."},
        "created_at": _TIME,
        "revoked_at": {"type": ["string", "null"], "format": "date-time"},
    },
}


def sharing_paths() -> dict[str, Any]:
    """The paths of export, import and shared links."""

    auth_errors = {"401": error_response("Unauthorized"), "429": error_response("TooManyRequests")}
    conversation_id = id_param("conversation_id", "conversation")
    return {
        "/api/conversations/{conversation_id}/export": {
            "parameters": [conversation_id],
            "get": {
                "summary": "Export a conversation as Markdown or JSON (a download)",
                "operationId": "exportConversation",
                "description": "Markdown: the selected branch (questions, tool calls, "
                "answers as their markdown source). JSON: the selected branch, or every "
                "branch with `tree=1`; `POST /api/conversations/import` reads it back.",
                "parameters": [
                    {
                        "name": "format",
                        "in": "query",
                        "schema": {"enum": ["json", "markdown"], "default": "json"},
                    },
                    {
                        "name": "tree",
                        "in": "query",
                        "schema": {"enum": ["0", "1"], "default": "0"},
                        "description": "1: every branch (JSON only).",
                    },
                ],
                "responses": {
                    "200": {
                        "description": "The file (Content-Disposition: attachment).",
                        "content": {
                            "application/json": {"schema": EXPORT_DOCUMENT},
                            "text/markdown": {"schema": {"type": "string"}},
                        },
                    },
                    "400": error_response("BadRequest"),
                    "404": error_response("NotFound"),
                    **auth_errors,
                },
            },
        },
        "/api/conversations/import": {
            "post": {
                "summary": "Import a JSON export as a new conversation of yours",
                "operationId": "importConversation",
                "description": "The whole file or nothing: an unknown format or version, "
                "a broken tree or a message over the length limit is refused and nothing "
                "is saved. Runs come back as finished records, without their events.",
                "requestBody": json_body(EXPORT_DOCUMENT),
                "responses": {
                    "201": json_response(ref("ConversationDetail"), "Imported."),
                    "400": error_response("BadRequest"),
                    "413": error_response("TooLarge"),
                    **auth_errors,
                },
            },
        },
        "/api/conversations/{conversation_id}/shares": {
            "parameters": [conversation_id],
            "post": {
                "summary": "Share a read-only snapshot of the selected branch",
                "operationId": "createShare",
                "description": "The snapshot is copied now: later messages do not appear. "
                "Artifacts are copied only with `include_artifacts`.",
                "requestBody": json_body(
                    {
                        "type": "object",
                        "properties": {"include_artifacts": {"type": "boolean"}},
                        "additionalProperties": False,
                    },
                    required=False,
                ),
                "responses": {
                    "201": json_response(SHARE, "The new link."),
                    "400": error_response("BadRequest"),
                    "404": error_response("NotFound"),
                    "413": error_response("TooLarge"),
                    **auth_errors,
                },
            },
        },
        "/api/shares": {
            "get": {
                "summary": "Your shared links, newest first (revoked ones too)",
                "operationId": "listShares",
                "responses": {
                    "200": json_response(
                        {
                            "type": "object",
                            "properties": {"shares": {"type": "array", "items": SHARE}},
                        },
                        "Shared links.",
                    ),
                    **auth_errors,
                },
            },
        },
        "/api/shares/{share_id}": {
            "parameters": [id_param("share_id", "shared link")],
            "get": {
                "summary": "A shared link",
                "operationId": "getShare",
                "responses": {
                    "200": json_response(SHARE, "The link."),
                    "404": error_response("NotFound"),
                    **auth_errors,
                },
            },
            "delete": {
                "summary": "Revoke a shared link (its page answers 404 from now on)",
                "operationId": "revokeShare",
                "responses": {
                    "204": {"description": "Revoked (or already revoked)."},
                    "404": error_response("NotFound"),
                    **auth_errors,
                },
            },
        },
    }
