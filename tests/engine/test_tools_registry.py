"""engine.tools: the decorator's schemas, validation, catalogs, filtering, timeouts."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Literal

import pytest

from engine.tools import (
    Artifact,
    Tool,
    ToolArgumentError,
    ToolRegistry,
    ToolResult,
    ToolTimeoutError,
    as_tool_result,
    compact_description,
    tool,
)

OBJECT = {"type": "object"}


@tool(description="Search the web for pages.")
async def web_search(
    query: Annotated[str, "What to look for"],
    max_results: int = 5,
    language: Literal["en", "fr"] = "en",
    site: str | None = None,
    tags: list[str] | None = None,
    strict: bool = False,
    threshold: float = 0.5,
    options: dict | None = None,
) -> str:
    return f"{query}|{max_results}|{language}|{site}|{tags}|{strict}|{threshold}|{options}"


def test_decorator_builds_the_schema_from_type_hints() -> None:
    assert web_search.name == "web_search"
    assert web_search.description == "Search the web for pages."
    schema = web_search.parameters
    assert schema["type"] == "object" and schema["required"] == ["query"]
    props = schema["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for"}
    assert props["max_results"] == {"type": "integer", "default": 5}
    assert props["language"] == {"enum": ["en", "fr"], "default": "en"}
    assert props["site"] == {"type": "string"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["strict"] == {"type": "boolean", "default": False}
    assert props["threshold"] == {"type": "number", "default": 0.5}
    assert props["options"] == {"type": "object"}


def test_decorator_uses_the_docstring_and_a_custom_name() -> None:
    @tool("calc", timeout=3)
    def calculate(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        return expression

    assert (calculate.name, calculate.description, calculate.timeout) == (
        "calc",
        "Evaluate an arithmetic expression.",
        3,
    )


async def test_async_and_sync_functions_are_invoked() -> None:
    threads: list[str] = []

    @tool()
    def sync_tool(x: int) -> dict:
        threads.append(threading.current_thread().name)
        return {"double": x * 2}

    async_result = await web_search.invoke({"query": "q"})
    sync_result = await sync_tool.invoke({"x": 4})

    assert async_result.content == "q|5|en|None|None|False|0.5|None"
    assert (sync_result.content, sync_result.content_type) == ('{"double": 8}', "json")
    assert threads[0] != threading.main_thread().name


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({}, "'query' is a required property"),
        ({"query": 5}, "query: 5 is not of type 'string'"),
        ({"query": "q", "language": "de"}, "language: 'de' is not one of ['en', 'fr']"),
        ({"query": "q", "max_results": "ten"}, "max_results: 'ten' is not of type 'integer'"),
    ],
)
async def test_invalid_arguments_raise_a_readable_error(arguments: dict, fragment: str) -> None:
    with pytest.raises(ToolArgumentError) as info:
        await web_search.invoke(arguments)
    assert str(info.value).startswith("Invalid arguments for tool 'web_search': ")
    assert fragment in str(info.value)


def test_validation_error_of_non_object_arguments() -> None:
    assert web_search.validation_error(["q"]) == "arguments must be a JSON object, got list"  # type: ignore[arg-type]
    assert web_search.validation_error({"query": "ok"}) is None


async def test_timeout_raises_tool_timeout_error() -> None:
    never = asyncio.Event()

    async def hang() -> str:
        await never.wait()
        return "never"

    slow = Tool("slow", "hangs", OBJECT, hang, timeout=0.01)
    with pytest.raises(ToolTimeoutError, match="Tool 'slow' timed out after 0.01 s"):
        await slow.invoke({})
    assert issubclass(ToolTimeoutError, TimeoutError)


async def test_exceptions_propagate_for_the_agent_to_classify() -> None:
    def broken() -> str:
        raise KeyError("missing")

    with pytest.raises(KeyError):
        await Tool("broken", "b", OBJECT, broken).invoke({})


def test_invalid_tool_definitions_are_rejected() -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        Tool("bad name!", "d", OBJECT, lambda: "")
    with pytest.raises(Exception, match="is not valid"):
        Tool("bad_schema", "d", {"type": "not-a-type"}, lambda: "")


def test_registry_basics() -> None:
    registry = ToolRegistry([web_search])
    other = registry.register(Tool("other", "Other tool", OBJECT, lambda: ""))
    assert other.name == "other"
    assert registry.names() == ["web_search", "other"]
    assert len(registry) == 2 and "other" in registry and "nope" not in registry
    assert registry.get("nope") is None and registry.get("other") is other
    assert [t.name for t in registry] == ["web_search", "other"]
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Tool("other", "dup", OBJECT, lambda: ""))
    clone = registry.copy()
    clone.register(Tool("third", "t", OBJECT, lambda: ""))
    assert len(registry) == 2 and len(clone) == 3


def test_filter_by_names_keeps_registry_order_and_drops_unknown() -> None:
    registry = ToolRegistry(Tool(f"t{n}", f"tool {n}", OBJECT, lambda: "") for n in range(5))
    filtered = registry.filter_by_names(["t3", "ghost", "t1", "t3"])
    assert filtered.names() == ["t1", "t3"]
    assert registry.filter_by_names([]).names() == []


def test_openai_tools_format() -> None:
    [spec] = ToolRegistry([web_search]).to_openai_tools()
    assert spec == {
        "type": "function",
        "function": {
            "name": "web_search",
            "description": "Search the web for pages.",
            "parameters": web_search.parameters,
        },
    }


def test_prompt_catalog_has_descriptions_and_schemas() -> None:
    catalog = ToolRegistry([web_search]).to_prompt_catalog()
    assert catalog.startswith(
        "- web_search: Search the web for pages.\n  parameters (JSON schema): {"
    )
    assert '"required": ["query"]' in catalog


def test_compact_catalog_cuts_descriptions_to_80_chars() -> None:
    long = Tool("long", "word " * 40 + "\nsecond line", OBJECT, lambda: "")
    short = Tool("short", "Multi\n  line   text", OBJECT, lambda: "")
    lines = ToolRegistry([long, short]).to_compact_catalog().splitlines()
    assert len(lines) == 2
    description = lines[0].removeprefix("- long: ")
    assert len(description) == 80 and description.endswith("...")
    assert description[:77] == ("word " * 40)[:77]
    assert lines[1] == "- short: Multi line text"
    assert compact_description("x" * 80) == "x" * 80
    assert compact_description("x" * 81) == "x" * 77 + "..."


def test_tool_results_and_artifact_observations() -> None:
    assert as_tool_result(None) == ToolResult("")
    assert as_tool_result("text") == ToolResult("text")
    assert as_tool_result([1, "a"]) == ToolResult('[1, "a"]', "json")
    same = ToolResult("x")
    assert as_tool_result(same) is same

    page = Artifact("page.html", "text/html", 10)
    html = ToolResult("<p>", content_type="html", artifacts=[page])
    assert html.observation() == (
        "[Artifact generated: page.html] The content is rendered as a preview in the UI and "
        "can be downloaded; do not repeat its source."
    )
    csv = ToolResult("3 rows", artifacts=[Artifact("data.csv", "text/csv", 5)])
    assert csv.observation() == "3 rows\n[Artifact generated: data.csv]"
    assert ToolResult("plain").observation() == "plain"
