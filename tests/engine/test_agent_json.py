"""JSON mode end to end: the reply formats, observations, parse failures and artifacts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import prompts
from engine.actions import parse_action
from engine.agent import ReActAgent
from engine.events import ThinkingDone
from engine.messages import ChatMessage
from engine.tools import Artifact, Tool, ToolRegistry, ToolResult, tool
from testing.scripted_llm import ScriptedLLM


@tool()
async def search(query: str, limit: int = 3) -> str:
    """Search the web."""
    return f"results for {query}"


@tool()
def square(number: int) -> str:
    """Square a number (sync tool)."""
    return str(number * number)


def registry(*tools: Tool) -> ToolRegistry:
    return ToolRegistry(tools or (search, square))


def tool_call(name: str, args: dict[str, Any], reasoning: str = "because") -> str:
    return json.dumps(
        {"type": "tool_call", "reasoning": reasoning, "tool_name": name, "tool_args": args}
    )


def final(answer: str, reasoning: str = "done") -> str:
    return json.dumps({"type": "final_answer", "reasoning": reasoning, "answer": answer})


def json_agent(llm: ScriptedLLM, tools: ToolRegistry | None = None, **kwargs: Any) -> ReActAgent:
    return ReActAgent(llm, tools if tools is not None else registry(), **kwargs)


async def test_direct_final_answer_without_tools() -> None:
    llm = ScriptedLLM([final("Paris")])
    agent = json_agent(llm)
    assert not agent._native_mode_active

    result = await agent.run("Capital of France?")

    assert result.status == "succeeded"
    assert result.answer == "Paris"
    assert result.iterations == 1
    assert result.steps == []
    assert [m.role for m in result.messages] == ["system", "user", "assistant"]
    assert result.messages[1].pinned and result.messages[1].content == "Capital of France?"
    request = llm.calls[0]
    assert request["tools"] is None and request["response_format"] is None
    system = request["messages"][0].content
    assert "- search: Search the web." in system and "- square:" in system
    assert '"type": "tool_call"' in system and '"type": "final_answer"' in system


async def test_one_tool_call_then_answer() -> None:
    llm = ScriptedLLM([tool_call("search", {"query": "django"}), final("Django is a framework")])

    result = await json_agent(llm).run("What is Django?")

    assert result.answer == "Django is a framework"
    assert result.iterations == 2
    [step] = result.steps
    assert (step.iteration, step.tool_name, step.tool_args) == (1, "search", {"query": "django"})
    assert step.observation == "results for django" and step.error is None
    roles = [(m.role, m.content) for m in llm.calls[1]["messages"][2:]]
    assert roles == [
        ("assistant", tool_call("search", {"query": "django"})),
        ("user", "Observation: results for django"),
    ]


async def test_several_sequential_tool_calls_and_usage() -> None:
    llm = ScriptedLLM(
        [
            tool_call("search", {"query": "a"}),
            tool_call("square", {"number": 7}),
            tool_call("search", {"query": "b", "limit": 1}),
            final("all done"),
        ]
    )

    result = await json_agent(llm).run("go")

    assert [s.tool_name for s in result.steps] == ["search", "square", "search"]
    assert [s.observation for s in result.steps] == ["results for a", "49", "results for b"]
    assert [s.iteration for s in result.steps] == [1, 2, 3]
    assert result.iterations == 4
    assert result.usage.total_tokens == 4 * 15
    observations = [m.content for m in result.messages if m.role == "user"][1:]
    assert observations == [
        "Observation: results for a",
        "Observation: 49",
        "Observation: results for b",
    ]


async def test_history_goes_between_system_and_pinned_query() -> None:
    history = [ChatMessage("user", "earlier question"), ChatMessage("assistant", "earlier answer")]
    llm = ScriptedLLM([final("ok")])

    await json_agent(llm, system_prompt="You are Bob.").run("now", history=history)

    sent = llm.calls[0]["messages"]
    assert [m.content for m in sent[1:]] == ["earlier question", "earlier answer", "now"]
    assert sent[0].content.startswith("You are Bob.\n\n")
    assert sent[-1].pinned and not sent[1].pinned


async def test_classic_text_form_is_accepted() -> None:
    llm = ScriptedLLM(
        [
            "Thought: I should square it\nAction: square[12]\nObservation: (invented)",
            'Thought: search too\nAction: search[{"query": "x", "limit": 2}]',
            "Thought: I know it now\nAction: Finish[144, found]",
        ]
    )

    result = await json_agent(llm).run("12 squared?")

    assert [(s.tool_name, s.tool_args) for s in result.steps] == [
        ("square", {"number": 12}),
        ("search", {"query": "x", "limit": 2}),
    ]
    assert result.answer == "144, found"


@pytest.mark.parametrize(
    ("text", "kind", "answer"),
    [
        ("Finish[the answer]", "final_answer", "the answer"),
        ("Thought: ok\nFinal Answer: forty-two", "final_answer", "forty-two"),
        (
            '```json\n{"type": "final_answer", "reasoning": "r", "answer": "x"}\n```',
            "final_answer",
            "x",
        ),
        ('{"answer": {"rows": 2}}', "final_answer", '{"rows": 2}'),
        ('{"action": "Final Answer", "action_input": "lc"}', "final_answer", "lc"),
        ('{"type": "final_answer", "reasoning": "r", "answer": ""}', "empty", ""),
        ("   ", "empty", ""),
    ],
)
def test_parse_action_final_forms(text: str, kind: str, answer: str) -> None:
    action = parse_action(text, registry())
    assert (action.kind, action.answer) == (kind, answer)


@pytest.mark.parametrize(
    ("text", "name", "args"),
    [
        ('{"tool_name": "search", "tool_args": {"query": "q"}}', "search", {"query": "q"}),
        (
            '{"type": "tool_call", "tool_name": "search", "tool_args": "plain"}',
            "search",
            {"query": "plain"},
        ),
        (
            '{"type": "tool_call", "tool_name": "square", "tool_args": "{\\"number\\": 3}"}',
            "square",
            {"number": 3},
        ),
        ('{"action": "search", "action_input": {"query": "lc"}}', "search", {"query": "lc"}),
        ("Action: square[ 5 ]", "square", {"number": 5}),
        ("Action: unknown_tool[hello]", "unknown_tool", {"input": "hello"}),
        (
            'Sure! {"type": "tool_call", "tool_name": "search", "tool_args": {}} ok',
            "search",
            {},
        ),
    ],
)
def test_parse_action_tool_forms(text: str, name: str, args: dict[str, Any]) -> None:
    action = parse_action(text, registry())
    assert (action.kind, action.tool_name, action.tool_args) == ("tool_call", name, args)


def test_parse_action_unparseable_carries_the_sentinel() -> None:
    action = parse_action("I think the answer is 4.", registry())
    assert action.kind == "final_answer"
    assert action.reasoning == "(could not parse LLM output as JSON)"
    assert action.answer == "I think the answer is 4."


async def test_parse_failure_then_reformatted_reply_continues() -> None:
    llm = ScriptedLLM(["I will search now", tool_call("search", {"query": "q"}), final("done")])

    result = await json_agent(llm).run("q")

    assert result.answer == "done"
    assert result.iterations == 3
    retry = llm.calls[1]["messages"]
    assert retry[-2].role == "assistant" and retry[-2].content == "I will search now"
    assert retry[-1].role == "user" and retry[-1].content == prompts.JSON_REFORMAT_REQUEST


async def test_second_parse_failure_makes_the_raw_content_the_answer() -> None:
    llm = ScriptedLLM(["not json", "The answer is 4, honestly."])

    result = await json_agent(llm).run("2+2?")

    assert result.status == "succeeded"
    assert result.answer == "The answer is 4, honestly."
    assert result.iterations == 2


async def test_parse_failures_count_toward_max_iterations() -> None:
    llm = ScriptedLLM(["not json"])

    result = await json_agent(llm, max_iterations=1).run("q")

    assert result.stop_reason == "max_iterations"
    assert "within 1 iterations" in result.answer


async def test_reasoning_content_is_used_when_json_reasoning_is_empty() -> None:
    events: list[Any] = []
    reply = {
        "content": json.dumps({"type": "final_answer", "reasoning": "", "answer": "x"}),
        "reasoning_content": "deep thoughts",
    }
    llm = ScriptedLLM([reply, final("y", reasoning="json reasoning")])
    agent = json_agent(llm, on_event=events.append)

    await agent.run("q")
    await agent.run("q2")

    thinking = [e.reasoning for e in events if isinstance(e, ThinkingDone)]
    assert thinking == ["deep thoughts", "json reasoning"]


async def test_json_mode_response_format_json_object() -> None:
    llm = ScriptedLLM([final("ok")], abilities={"json_mode": True})

    await json_agent(llm).run("q")

    assert llm.calls[0]["response_format"] == {"type": "json_object"}


async def test_json_schema_openai_dialect_constrains_tool_names() -> None:
    llm = ScriptedLLM([final("ok")], abilities={"json_mode": True, "json_schema": True})

    await json_agent(llm).run("q")

    fmt = llm.calls[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "agent_action"
    schema = fmt["json_schema"]["schema"]
    assert schema["properties"]["tool_name"]["enum"] == ["search", "square"]
    assert schema["properties"]["type"]["enum"] == ["tool_call", "final_answer"]


async def test_json_schema_llamacpp_dialect() -> None:
    abilities = {"json_mode": True, "json_schema": True, "json_schema_dialect": "llamacpp"}
    llm = ScriptedLLM([final("ok")], abilities=abilities)

    await json_agent(llm).run("q")

    fmt = llm.calls[0]["response_format"]
    assert fmt["type"] == "json_object"
    assert fmt["schema"]["properties"]["tool_name"]["enum"] == ["search", "square"]


async def test_tool_errors_become_observations() -> None:
    llm = ScriptedLLM(
        [
            tool_call("nope", {}),
            tool_call("square", {"number": "seven"}),
            final("gave up"),
        ]
    )

    result = await json_agent(llm).run("q")

    unknown, invalid = result.steps
    assert unknown.error.startswith("Unknown tool 'nope'. Available tools: search, square")
    assert unknown.observation == f"Error: {unknown.error}"
    assert invalid.error.startswith("Invalid arguments for tool 'square'")
    observations = [m.content for m in result.messages if m.content.startswith("Observation:")]
    assert observations[0].startswith("Observation: Error: Unknown tool 'nope'")
    assert observations[1].startswith("Observation: Error: Invalid arguments")


async def test_artifacts_are_summarised_for_the_model() -> None:
    page = Artifact(name="report.html", mime_type="text/html", size=12)

    async def render(title: str) -> ToolResult:
        return ToolResult("<h1>hi</h1>", content_type="html", artifacts=[page])

    render_tool = Tool("render", "Render a page", {"type": "object"}, render)
    llm = ScriptedLLM([tool_call("render", {"title": "t"}), final("rendered")])

    result = await json_agent(llm, registry(render_tool)).run("make a page")

    [step] = result.steps
    assert step.artifacts == [page]
    assert step.observation.startswith("[Artifact generated: report.html]")
    assert "<h1>" not in llm.calls[1]["messages"][-1].content


async def test_no_tools_prompt_says_answer_directly() -> None:
    llm = ScriptedLLM([final("hi")], abilities={"json_mode": True, "json_schema": True})

    result = await ReActAgent(llm, ToolRegistry()).run("hello")

    assert result.answer == "hi"
    assert "no tools are available" in llm.calls[0]["messages"][0].content
    schema = llm.calls[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["type"]["enum"] == ["final_answer"]


async def test_use_native_tools_false_forces_json_mode() -> None:
    llm = ScriptedLLM([final("ok")], abilities={"tool_call": True})
    agent = json_agent(llm, use_native_tools=False)

    assert not agent._native_mode_active
    await agent.run("q")
    assert llm.calls[0]["tools"] is None
