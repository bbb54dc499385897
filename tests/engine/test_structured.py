"""structured_llm_call: every level, its exact call count, and the fallbacks."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from engine.cancel import CancelledRun, CancelToken
from engine.llm.base import BadRequestError, UnavailableError
from engine.messages import ChatMessage, Usage
from engine.structured import (
    REFORMAT_PROMPT,
    StructuredCallResult,
    StructuredOutputError,
    structured_llm_call,
)
from testing.scripted_llm import ScriptedLLM

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city"],
}
MESSAGES = [
    ChatMessage("system", "You extract facts."),
    ChatMessage("user", "Oslo has 700000 people"),
]
GOOD = '{"city": "Oslo", "population": 700000}'

FULL = {"tool_call": True, "json_mode": True}
JSON_ONLY = {"json_mode": True}
PLAIN: dict[str, Any] = {}


def fc(arguments: dict[str, Any], name: str = "extract") -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def call(llm: ScriptedLLM, **kwargs: Any) -> StructuredCallResult:
    return await structured_llm_call(llm, MESSAGES, SCHEMA, "extract", **kwargs)


async def test_native_fc_forces_the_function() -> None:
    llm = ScriptedLLM([fc({"city": "Oslo"})], abilities=FULL)

    result = await call(llm, description="Extract the city")

    assert (result.value, result.level_used, result.llm_calls) == ({"city": "Oslo"}, "native_fc", 1)
    assert result.raw_data == {"city": "Oslo"}
    request = llm.calls[0]
    assert request["tool_choice"] == {"type": "function", "function": {"name": "extract"}}
    [tool] = request["tools"]
    assert tool["function"]["name"] == "extract" and tool["function"]["parameters"] == SCHEMA
    assert tool["function"]["description"] == "Extract the city"
    assert request["messages"] == MESSAGES


async def test_native_fc_reads_json_from_content_when_no_call_came_back() -> None:
    llm = ScriptedLLM([f"Here: {GOOD}"], abilities=FULL)

    result = await call(llm)

    assert result.level_used == "native_fc" and result.value["population"] == 700000


@pytest.mark.parametrize(
    ("abilities", "expected_calls", "levels"),
    [
        (FULL, 5, ["fc", "json", "json", "plain", "plain"]),
        (JSON_ONLY, 4, ["json", "json", "plain", "plain"]),
        (PLAIN, 2, ["plain", "plain"]),
        ({"tool_call": True, "tool_choice": False}, 2, ["plain", "plain"]),
        (
            {"tool_call": True, "json_mode": True, "tool_choice": False},
            4,
            ["json", "json", "plain", "plain"],
        ),
    ],
)
async def test_worst_case_call_counts(
    abilities: dict[str, Any], expected_calls: int, levels: list[str]
) -> None:
    llm = ScriptedLLM(["garbage"] * expected_calls, abilities=abilities)

    with pytest.raises(StructuredOutputError) as info:
        await call(llm)

    assert isinstance(info.value, ValueError)
    assert len(llm.calls) == expected_calls and llm.remaining == 0
    assert [_level_of(c) for c in llm.calls] == levels


def _level_of(request: dict[str, Any]) -> str:
    if request["tool_choice"] is not None:
        return "fc"
    return "json" if request["response_format"] is not None else "plain"


async def test_bad_request_on_forced_tool_choice_falls_to_json_mode() -> None:
    llm = ScriptedLLM(
        [BadRequestError("tool_choice not supported with thinking", status_code=400), GOOD],
        abilities=FULL,
    )

    result = await call(llm)

    assert (result.level_used, result.llm_calls) == ("json_mode", 2)
    assert llm.calls[1]["response_format"] == {"type": "json_object"}
    assert llm.calls[1]["tools"] is None


async def test_json_mode_reformat_retry_uses_the_exact_prompt() -> None:
    llm = ScriptedLLM(["Sorry, here you go: city Oslo", GOOD], abilities=JSON_ONLY)

    result = await call(llm)

    assert (result.level_used, result.llm_calls) == ("json_mode", 2)
    retry = llm.calls[1]["messages"]
    assert retry[-2].role == "assistant" and retry[-2].content == "Sorry, here you go: city Oslo"
    assert retry[-1].role == "user" and retry[-1].content == REFORMAT_PROMPT
    assert REFORMAT_PROMPT == (
        "Your previous response could not be parsed as valid JSON. Reply with ONLY a JSON "
        "object matching the schema, no markdown fences."
    )


async def test_schema_instruction_is_merged_into_the_first_system_message() -> None:
    llm = ScriptedLLM([GOOD])

    await call(llm)

    sent = llm.calls[0]["messages"]
    assert [m.role for m in sent] == ["system", "user"]
    assert sent[0].content.startswith("You extract facts.\n\n")
    assert '"required": ["city"]' in sent[0].content


async def test_schema_instruction_without_system_message() -> None:
    llm = ScriptedLLM([GOOD])

    await structured_llm_call(llm, [ChatMessage("user", "hi")], SCHEMA, "extract")

    assert [m.role for m in llm.calls[0]["messages"]] == ["system", "user"]


async def test_json_schema_openai_dialect() -> None:
    llm = ScriptedLLM([GOOD], abilities={"json_mode": True, "json_schema": True})

    await call(llm)

    assert llm.calls[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "extract", "schema": SCHEMA},
    }


async def test_json_schema_llamacpp_dialect() -> None:
    abilities = {"json_mode": True, "json_schema": True, "json_schema_dialect": "llamacpp"}
    llm = ScriptedLLM([GOOD], abilities=abilities)

    await call(llm)

    assert llm.calls[0]["response_format"] == {"type": "json_object", "schema": SCHEMA}


async def test_plain_text_extracts_json_from_prose_and_fences() -> None:
    llm = ScriptedLLM([f"Sure!\n```json\n{GOOD}\n```\nAnything else?"])

    result = await call(llm)

    assert (result.level_used, result.llm_calls, result.value["city"]) == ("plain_text", 1, "Oslo")


async def test_regex_fallback_is_the_plain_levels_last_resort() -> None:
    def by_regex(text: str) -> dict[str, Any] | None:
        match = re.search(r"city is (\w+)", text)
        return {"city": match.group(1)} if match else None

    llm = ScriptedLLM(["garbage", "the city is Bergen"])

    result = await call(llm, regex_fallback=by_regex)

    assert (result.value, result.level_used, result.llm_calls) == (
        {"city": "Bergen"},
        "plain_text",
        2,
    )


async def test_regex_fallback_only_runs_at_the_plain_level() -> None:
    seen: list[str] = []

    def by_regex(text: str) -> dict[str, Any] | None:
        seen.append(text)
        match = re.search(r"city is (\w+)", text)
        return {"city": match.group(1)} if match else None

    llm = ScriptedLLM(
        ["the city is Json1", "the city is Json2", "the city is Bergen"], abilities=JSON_ONLY
    )

    result = await call(llm, regex_fallback=by_regex)

    assert (result.value, result.level_used, result.llm_calls) == (
        {"city": "Bergen"},
        "plain_text",
        3,
    )
    assert seen == ["the city is Bergen"]


async def test_parse_fn_transforms_the_value() -> None:
    llm = ScriptedLLM([GOOD])

    result = await call(llm, parse_fn=lambda raw: raw["city"].upper())

    assert result.value == "OSLO" and result.raw_data == {"city": "Oslo", "population": 700000}


async def test_parse_fn_returning_none_or_raising_falls_through() -> None:
    verdicts = iter([None, KeyError("nope"), "accepted"])

    def picky(raw: dict[str, Any]) -> Any:
        verdict = next(verdicts)
        if isinstance(verdict, Exception):
            raise verdict
        return verdict

    llm = ScriptedLLM([fc({"city": "A"}), GOOD, GOOD], abilities=FULL)

    result = await call(llm, parse_fn=picky)

    # native_fc: None -> next level; json_mode: raises -> reformat retry -> accepted
    assert (result.value, result.level_used, result.llm_calls) == ("accepted", "json_mode", 3)


async def test_schema_violation_counts_as_a_parse_failure() -> None:
    llm = ScriptedLLM([fc({"population": 3}), '{"city": 5}', GOOD], abilities=FULL)

    result = await call(llm)

    assert (result.level_used, result.llm_calls) == ("json_mode", 3)


async def test_default_value_on_total_failure() -> None:
    llm = ScriptedLLM(["no", "still no"])

    result = await call(llm, default_value={"city": "unknown"})

    assert result.value == {"city": "unknown"}
    assert (result.level_used, result.llm_calls, result.raw_data) == ("default", 2, None)
    assert result.total_usage == Usage(20, 10, 30)


async def test_default_value_none_is_a_valid_default() -> None:
    llm = ScriptedLLM(["no", "no"])
    assert (await call(llm, default_value=None)).value is None


async def test_exception_ends_a_text_level_without_its_retry() -> None:
    llm = ScriptedLLM([UnavailableError("down"), GOOD], abilities=JSON_ONLY)

    result = await call(llm)

    assert (result.level_used, result.llm_calls) == ("plain_text", 2)


async def test_total_failure_error_names_the_last_cause() -> None:
    llm = ScriptedLLM([UnavailableError("server down")])

    with pytest.raises(StructuredOutputError, match="server down"):
        await call(llm)


async def test_usage_is_summed_over_all_calls() -> None:
    llm = ScriptedLLM(
        [{"content": "x", "usage": {"prompt_tokens": 7, "completion_tokens": 1}}, GOOD],
        abilities=JSON_ONLY,
    )

    result = await call(llm)

    assert result.total_usage == Usage(17, 6, 23)


async def test_cancellation_propagates() -> None:
    token = CancelToken()

    async def slow(messages: list[ChatMessage], kwargs: dict[str, Any]) -> str:
        token.cancel()
        await asyncio.Event().wait()
        return GOOD

    llm = ScriptedLLM([slow], abilities=FULL)

    with pytest.raises(CancelledRun):
        await call(llm, cancel=token)
    assert len(llm.calls) == 1
