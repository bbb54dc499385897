"""Building blocks of the OpenAPI document, shared by its parts (schema, schema_sharing)."""

from __future__ import annotations

from typing import Any

from conversations.http.params import DB_ID_MAX

__all__ = ["error_response", "id_param", "json_body", "json_response", "ref"]


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_response(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def error_response(description: str) -> dict[str, Any]:
    return {"$ref": "#/components/responses/" + description}


def id_param(name: str, what: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": f"The {what}'s id (another user's id answers 404).",
        "schema": {"type": "integer", "minimum": 1, "maximum": DB_ID_MAX},
    }


def json_body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": schema}}}
