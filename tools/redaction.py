"""Secrets an admin configured never come back out of a tool.

A tool sends secrets (an API key in a header, a token in an MCP server's environment); the
service may send them back (an echo, a debug endpoint, an error page quoting the request),
and a tool's result reaches the model, the event log and the page. Each result of a run's
tools is redacted with every secret those tools hold: the values, and a credential's part
after its scheme ("Bearer <token>": the token alone too).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import json
from collections.abc import Iterable, Sequence
from typing import Any

from engine import Tool, ToolResult
from engine.tools import as_tool_result

REDACTED = "[secret redacted]"
# Shorter values are too likely to be ordinary text ("on", "json", a port number).
MIN_SECRET_CHARS = 6


def secret_values(settings: Iterable[Any]) -> list[str]:
    """Every secret string in ``settings`` (nested dicts, lists, JSON text), longest first,
    with the credential part of "<scheme> <credential>" values."""
    found: set[str] = set()
    pending = list(settings)
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list | tuple):
            pending.extend(value)
        elif isinstance(value, str):
            decoded = _json_container(value)
            if decoded is not None:
                pending.append(decoded)
                continue
            found.add(value)
            scheme, _, credential = value.partition(" ")
            if credential and scheme.isalpha():
                found.add(credential)
    return sorted((s for s in found if len(s.strip()) >= MIN_SECRET_CHARS), key=len, reverse=True)


def _json_container(text: str) -> Any:
    """A JSON object or list stored as text (secret settings often are), else None."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:  # longest first: a value before the credential inside it
        text = text.replace(secret, REDACTED)
    return text


def redacting(tool: Tool, secrets: Sequence[str]) -> Tool:
    """``tool``, its results redacted of ``secrets``."""
    if not secrets:
        return tool
    func = tool.func

    async def call(**arguments: Any) -> ToolResult:
        if inspect.iscoroutinefunction(func):
            value = await func(**arguments)
        else:
            value = await asyncio.to_thread(functools.partial(func, **arguments))
        result = as_tool_result(value)
        return dataclasses.replace(result, content=redact(result.content, secrets))

    return dataclasses.replace(tool, func=call)
