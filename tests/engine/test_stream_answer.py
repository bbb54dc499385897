"""stream_answer: closing a streamed answer, the rewrite option and its fallbacks;
ScriptedLLM streaming."""

from __future__ import annotations

from typing import Any

import pytest

from engine import prompts
from engine.agent import AgentResult, ReActAgent, Step
from engine.answer import REWRITE_FAILED
from engine.errors import ScriptExhaustedError
from engine.events import AgentEvent, AnswerDelta, AnswerDone, AnswerStart, Done, ThinkingDone
from engine.llm.base import ChatDelta, UnavailableError
from engine.messages import ChatMessage, Usage
from engine.tools import Tool, ToolRegistry
from testing.scripted_llm import ScriptedLLM, split_chunks

OBJECT = {"type": "object"}


def result_with(steps: list[Step], answer: str = "loop findings", **kwargs: Any) -> AgentResult:
    return AgentResult(
        answer=answer,
        messages=[],
        steps=steps,
        iterations=len(steps) + 1,
        usage=Usage(100, 20, 120),
        elapsed=1.5,
        **kwargs,
    )


def agent_with(
    llm: ScriptedLLM, events: list[AgentEvent] | None = None, **kwargs: Any
) -> ReActAgent:
    return ReActAgent(
        llm,
        ToolRegistry(),
        on_event=events.append if events is not None else None,
        **kwargs,
    )


def rewriting(llm: ScriptedLLM, events: list[AgentEvent] | None = None, **kwargs: Any):
    return agent_with(llm, events, rewrite_answer=True, **kwargs)


async def collect(agent: ReActAgent, result: AgentResult, query: str = "question?") -> list[str]:
    return [chunk async for chunk in agent.stream_answer(result, query)]


STEP = Step(1, "search", {"q": "oslo"}, "Oslo is the capital")


# ------------------------------------------------------------ the answer the loop streamed


async def test_a_streamed_answer_ends_without_another_call() -> None:
    events: list[AgentEvent] = []
    llm = ScriptedLLM([])
    result = result_with([STEP], answer="Oslo.", answer_streamed=True)

    chunks = await collect(agent_with(llm, events), result)

    assert chunks == ["Oslo."] and llm.calls == []
    assert [type(e) for e in events] == [AnswerDone, Done]  # its deltas went out already
    assert events[-1].answer == "Oslo." and events[-1].status == "succeeded"


async def test_an_incomplete_streamed_answer_ends_incomplete_with_its_reason() -> None:
    events: list[AgentEvent] = []
    result = result_with(
        [], answer="Half", answer_streamed=True, status="incomplete", error="cut off"
    )

    await collect(agent_with(ScriptedLLM([]), events), result)

    done = events[-1]
    assert isinstance(done, Done) and done.answer == "Half"
    assert done.to_dict()["status"] == "incomplete" and done.to_dict()["reason"] == "cut off"


async def test_paused_run_streams_its_explanation_without_an_llm_call() -> None:
    llm = ScriptedLLM([])
    events: list[AgentEvent] = []
    result = result_with([], answer="I stopped because ...", status="paused")

    chunks = await collect(agent_with(llm, events), result)

    assert chunks == ["I stopped because ..."] and llm.calls == []
    assert [type(e) for e in events] == [AnswerStart, AnswerDelta, AnswerDone, Done]


async def test_paused_run_says_paused_in_its_done_event() -> None:
    """API clients read a run's outcome from ``done``: a run the guard paused must not
    look like one that succeeded."""
    events: list[AgentEvent] = []
    result = result_with([], answer="I stopped: the same error three times.", status="paused")
    result.error = "I stopped: the same error three times."

    await collect(agent_with(ScriptedLLM([]), events), result)

    done = events[-1].to_dict()
    assert done["status"] == "paused" and done["reason"] == result.error


async def test_finish_emits_done_for_callers_that_do_not_stream() -> None:
    events: list[AgentEvent] = []
    agent = agent_with(ScriptedLLM([]), events)

    await agent.finish(result_with([], answer="short"))

    assert [e.to_dict() for e in events] == [
        {
            "status": "succeeded",
            "answer": "short",
            "iterations": 1,
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            "elapsed": 1.5,
        }
    ]


# ------------------------------------------------------------ the rewrite (a model option)


async def test_rewrite_sees_the_history_the_question_and_the_cut_trace() -> None:
    long_observation = "x" * 2_000 + "TAIL-NOT-SHOWN"
    steps = [
        STEP,
        Step(2, "fetch", {"url": "https://e.org"}, long_observation),
        Step(3, "calc", {"e": "1/0"}, "Error: division by zero", error="division by zero"),
    ]
    history = [
        ChatMessage("system", "the loop's own system prompt"),
        ChatMessage("user", "Which cities did we talk about?"),
        ChatMessage("assistant", "Oslo and Bergen."),
    ]
    llm = ScriptedLLM(["Final answer."])
    result = result_with(steps, answer_streamed=False, history=history)

    await collect(rewriting(llm), result, "And the second one?")

    request = llm.calls[0]
    assert request["method"] == "stream_chat"
    system, *earlier, user = request["messages"]
    assert system.role == "system" and system.content == prompts.SYNTHESIS_SYSTEM_PROMPT
    for phrase in ("Present the results directly", "Markdown", "meta-commentary", "same language"):
        assert phrase in system.content
    assert [(m.role, m.content) for m in earlier] == [
        ("user", "Which cities did we talk about?"),
        ("assistant", "Oslo and Bergen."),
    ]
    text = user.content
    assert text.startswith("## Question\nAnd the second one?")
    assert 'search({"q": "oslo"})\nOslo is the capital' in text
    assert "x" * 2_000 in text and "TAIL-NOT-SHOWN" not in text
    assert "Error: division by zero" in text
    assert "loop findings" in text


async def test_no_rewrite_for_a_run_without_tools() -> None:
    llm = ScriptedLLM([])
    chunks = await collect(rewriting(llm), result_with([], answer="Hi.", answer_streamed=True))
    assert chunks == ["Hi."] and llm.calls == []


async def test_rewrite_streams_chunks_and_emits_events_then_done_once() -> None:
    events: list[AgentEvent] = []
    llm = ScriptedLLM(
        [{"content": "Oslo is **big**.", "usage": {"prompt_tokens": 30, "completion_tokens": 5}}]
    )
    result = result_with([STEP])

    chunks = await collect(rewriting(llm, events), result)

    assert "".join(chunks) == "Oslo is **big**."
    kinds = [type(e) for e in events]
    assert kinds[0] is AnswerStart and kinds[-2:] == [AnswerDone, Done]
    assert "".join(e.content for e in events if isinstance(e, AnswerDelta)) == "Oslo is **big**."
    done = events[-1]
    assert isinstance(done, Done)
    assert done.answer == "Oslo is **big**."
    assert done.usage == {"prompt_tokens": 130, "completion_tokens": 25, "total_tokens": 155}
    assert done.iterations == 2 and done.elapsed >= 1.5
    assert result.answer == "loop findings"  # the loop's answer stays as it was


async def test_rewrite_failure_before_any_chunk_keeps_the_loop_answer_and_says_so() -> None:
    events: list[AgentEvent] = []
    llm = ScriptedLLM([UnavailableError("stream refused")])

    chunks = await collect(rewriting(llm, events), result_with([STEP], answer="fallback answer"))

    assert chunks == ["fallback answer"]
    done = events[-1]
    assert isinstance(done, Done) and done.answer == "fallback answer"
    assert done.status == "succeeded" and done.reason == REWRITE_FAILED


async def test_rewrite_failure_midway_keeps_the_partial_answer_marked_incomplete() -> None:
    events: list[AgentEvent] = []
    llm = ScriptedLLM([{"content": "Partial answer", "stream_error": UnavailableError("reset")}])
    result = result_with([STEP])

    chunks = await collect(rewriting(llm, events), result)

    assert "".join(chunks) == "Partial answer"
    done = events[-1]
    assert isinstance(done, Done) and done.answer == "Partial answer"
    assert result.status == "incomplete"
    assert done.status == "incomplete"
    assert "stopped sending the answer partway" in done.to_dict()["reason"]


async def test_a_rewrite_past_its_length_limit_is_cut_and_marked_incomplete() -> None:
    events: list[AgentEvent] = []
    endless = "word " * 1_000  # 5,000 characters: about 1,250 tokens
    llm = ScriptedLLM([{"content": endless}])
    result = result_with([STEP])

    answer = "".join(await collect(rewriting(llm, events, max_answer_tokens=100), result))

    assert answer == endless[:400]  # 100 tokens of 4 characters
    assert result.status == "incomplete"
    assert isinstance(events[-1], Done) and events[-1].status == "incomplete"
    assert "length limit (100 tokens)" in events[-1].reason
    assert llm.calls[0]["closed"] is True
    # the loop's 120 tokens, plus the cut rewrite's estimate (its usage chunk never came)
    assert events[-1].usage["completion_tokens"] == 20 + 100
    assert events[-1].usage["prompt_tokens"] > 100


async def test_an_empty_rewrite_keeps_the_loop_answer() -> None:
    chunks = await collect(rewriting(ScriptedLLM([""])), result_with([STEP], answer="from loop"))
    assert chunks == ["from loop"]


async def test_rewrite_on_a_model_without_streaming_uses_chat() -> None:
    llm = ScriptedLLM(["Whole answer at once."], abilities={"streaming": False})

    chunks = await collect(rewriting(llm), result_with([STEP]))

    assert chunks == ["Whole answer at once."]
    assert llm.calls[0]["method"] == "chat"


async def test_run_with_rewrite_end_to_end() -> None:
    async def lookup(city: str) -> str:
        return f"{city}: 700k people"

    events: list[AgentEvent] = []
    llm = ScriptedLLM(
        [
            {"tool_calls": [{"name": "lookup", "arguments": {"city": "Oslo"}}]},
            "Oslo has 700k people.",
            "## Oslo\nAbout **700,000** people live in Oslo.",
        ],
        abilities={"tool_call": True},
    )
    agent = ReActAgent(
        llm,
        ToolRegistry([Tool("lookup", "l", OBJECT, lookup)]),
        on_event=events.append,
        rewrite_answer=True,
    )

    result = await agent.run("How many people live in Oslo?")
    answer = "".join(
        [c async for c in agent.stream_answer(result, "How many people live in Oslo?")]
    )

    assert answer.startswith("## Oslo")
    assert "Oslo: 700k people" in llm.calls[2]["messages"][-1].content
    # The loop's draft streamed as the step's thought, never as the answer.
    deltas = "".join(e.content for e in events if isinstance(e, AnswerDelta))
    assert deltas == answer and "Oslo has 700k people." not in deltas
    thoughts = [e for e in events if isinstance(e, ThinkingDone) and e.iteration == 2]
    assert thoughts[0].reasoning == "Oslo has 700k people."
    dones = [e for e in events if isinstance(e, Done)]
    assert len(dones) == 1 and dones[0].answer == answer and dones[0].usage["total_tokens"] == 45


# ---------------------------------------------------------------- ScriptedLLM streaming


def test_split_chunks_round_trips() -> None:
    text = "  Hello,  world!\nNew line\tand tab "
    assert "".join(split_chunks(text)) == text
    assert split_chunks("one two") == ["one ", "two"]


async def test_scripted_stream_ends_with_usage_and_tool_calls() -> None:
    llm = ScriptedLLM(
        [
            {
                "content": "a b",
                "tool_calls": [{"name": "t", "arguments": {"x": 1}}],
                "reasoning_content": "hm",
            }
        ]
    )

    deltas: list[ChatDelta] = [d async for d in llm.stream_chat([])]

    assert deltas[0].reasoning_content == "hm"
    assert [d.content for d in deltas[1:-1]] == ["a ", "b"]
    last = deltas[-1]
    assert last.finish_reason == "tool_calls" and last.usage == Usage(10, 5, 15)
    assert last.tool_calls is not None and last.tool_calls[0].arguments == {"x": 1}
    assert llm.calls[0]["closed"] is True and llm.calls[0]["stream"] is True


async def test_scripted_llm_reports_an_exhausted_script() -> None:
    llm = ScriptedLLM(["only one"])
    await llm.chat([])

    with pytest.raises(ScriptExhaustedError, match="exhausted") as info:
        await llm.chat([])
    assert isinstance(info.value, AssertionError)


async def test_scripted_llm_callable_items_see_the_request() -> None:
    seen: list[Any] = []

    def reply(messages: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        seen.append((len(messages), kwargs["response_format"]))
        return {"content": "computed", "usage": Usage(1, 2, 3)}

    llm = ScriptedLLM([reply], abilities={"vision": True})
    response = await llm.chat([], response_format={"type": "json_object"}, temperature=0)

    assert (response.content, response.usage) == ("computed", Usage(1, 2, 3))
    assert seen == [(0, {"type": "json_object"})]
    assert llm.calls[0]["opts"] == {"temperature": 0}
    assert llm.abilities["vision"] is True and llm.abilities["tool_call"] is False
