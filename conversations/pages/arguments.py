"""How a tool card shows a call's arguments: code as code, the rest as JSON.

A model passes code as a JSON string ("print(\\"hi\\")\\n..."): shown as JSON it is one
escaped line. A string argument that is code (a multi-line string, or a tool's known
code argument) is shown as a code block of its own, with the language it is written in
where that is known (highlighted by static/js/markdown.js); every other argument stays
in the indented JSON the cards always showed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CodeArgument", "code_arguments", "other_arguments"]

# The language of a tool's code argument, by tool and by argument name.
TOOL_CODE: dict[str, tuple[str, str]] = {"python": ("code", "python")}
ARGUMENT_LANGUAGES: dict[str, str] = {
    "python": "python",
    "sql": "sql",
    "html": "html",
    "css": "css",
    "javascript": "javascript",
    "js": "javascript",
    "bash": "bash",
    "shell": "bash",
    "command": "bash",
    "json": "json",
    "yaml": "yaml",
}


@dataclass(frozen=True)
class CodeArgument:
    """One argument shown as code: its name, its text, its language ("" when unknown)."""

    name: str
    code: str
    language: str = ""


def _language(tool_name: str, name: str) -> str | None:
    """The language of argument ``name`` if it is a known code argument, else None."""
    known = TOOL_CODE.get(tool_name)
    if known and known[0] == name:
        return known[1]
    return ARGUMENT_LANGUAGES.get(name.lower())


def _is_code(tool_name: str, name: str, value: Any) -> bool:
    if not isinstance(value, str) or not value.strip():
        return False
    return "\n" in value.strip() or _language(tool_name, name) is not None


def code_arguments(tool_name: str, args: Any) -> list[CodeArgument]:
    """The arguments of a call that are shown as code blocks, in the call's order."""
    if not isinstance(args, dict):
        return []
    return [
        CodeArgument(str(name), value, _language(tool_name, str(name)) or "")
        for name, value in args.items()
        if _is_code(tool_name, str(name), value)
    ]


def other_arguments(tool_name: str, args: Any) -> Any:
    """The arguments shown as JSON: all but the code ones (the value as is if not a dict)."""
    if not isinstance(args, dict):
        return args
    return {
        name: value for name, value in args.items() if not _is_code(tool_name, str(name), value)
    }
