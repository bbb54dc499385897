"""Every loop call streams: the answer shows at the model's first token, with no second call.

Native mode streams text as the answer and takes it back when tool calls follow; JSON mode
parses the action while it streams and streams a final answer's ``answer`` field; reasoning
channels stream as the step's thought.
"""

from __future__ import annotations

import json
from typing import Any

from engine.agent import ReActAgent
from engine.events import (
    AgentEvent,
    AnswerDelta,
    AnswerReset,
    AnswerStart,
    Done,
    ThinkingDone,
    ThoughtDelta,
)
from engine.interrupts import InterruptQueue
from engine.llm.base import UnavailableError
from engine.messages import ChatMessage
from engine.tools import Tool, ToolRegistry
from testing.scripted_llm import ScriptedLLM

OBJECT = {"type": "object", "properties": {"city": {"type": "string"}}}


async def lookup(city: str = "") -> str:
    return f"{city}: 700k people"


def tools() -> ToolRegistry:
    return ToolRegistry([Tool("lookup", "Look a city up", OBJECT, lookup)])


class Recorder:
    """Collects events, noting for each answer delta whether the LLM's stream was open."""

    def __init__(self, llm: ScriptedLLM) -> None:
        self.llm = llm
        self.events: list[AgentEvent] = []
        self.open_at_delta: list[bool] = []

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        if isinstance(event, AnswerDelta):
            self.open_at_delta.append(not self.llm.calls[-1].get("closed", False))

    def answer_text(self) -> str:
        """The answer as a reader holds it: deltas since the last start."""
        text = ""
        for event in self.events:
            if isinstance(event, AnswerStart | AnswerReset):
                text = ""
            elif isinstance(event, AnswerDelta):
                text += event.content
        return text

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


async def run_to_done(agent: ReActAgent, query: str = "q", history=()) -> tuple[Any, list[str]]:
    result = await agent.run(query, history)
    chunks = [c async for c in agent.stream_answer(result, query)]
    return result, chunks


def native_llm(*replies: Any, **kwargs: Any) -> ScriptedLLM:
    return ScriptedLLM(list(replies), abilities={"tool_call": True}, **kwargs)


def json_action(**fields: Any) -> str:
    return json.dumps(fields)


# ---------------------------------------------------------------------------- native mode


async def test_native_answer_streams_from_the_first_token_in_one_call() -> None:
    llm = native_llm("Oslo has about **700,000** people, more each year.", stream_chunk_delay=0.001)
    seen = Recorder(llm)
    agent = ReActAgent(llm, tools(), on_event=seen)

    result, chunks = await run_to_done(agent)

    assert len(llm.calls) == 1 and llm.calls[0]["method"] == "stream_chat"
    assert len(seen.open_at_delta) > 3 and seen.open_at_delta[0] is True
    assert seen.answer_text() == result.answer == "".join(chunks)
    assert result.answer == "Oslo has about **700,000** people, more each year."
    done = seen.of(Done)
    assert len(done) == 1 and done[0].answer == result.answer


async def test_text_before_tool_calls_is_taken_back_and_shown_as_the_steps_thought() -> None:
    llm = native_llm(
        {"content": "Let me look it up.", "tool_calls": [{"name": "lookup", "arguments": {}}]},
        "About 700k.",
    )
    seen = Recorder(llm)
    agent = ReActAgent(llm, tools(), on_event=seen)

    result, _ = await run_to_done(agent)

    kinds = [type(e).__name__ for e in seen.events]
    reset = kinds.index("AnswerReset")
    assert "AnswerDelta" in kinds[:reset]  # it did show at once
    thought = seen.of(ThinkingDone)[0]
    assert thought.iteration == 1 and thought.reasoning == "Let me look it up."
    assert kinds.index("ThinkingDone") > reset
    assert seen.answer_text() == result.answer == "About 700k."


async def test_reasoning_streams_as_the_steps_thought_never_as_the_answer() -> None:
    llm = native_llm({"reasoning_content": "The user wants a number.", "content": "42."})
    seen = Recorder(llm)

    result, _ = await run_to_done(ReActAgent(llm, tools(), on_event=seen))

    assert "".join(e.content for e in seen.of(ThoughtDelta)) == "The user wants a number."
    assert seen.of(ThinkingDone)[0].reasoning == "The user wants a number."
    assert seen.answer_text() == result.answer == "42."


async def test_the_answering_call_sees_the_conversation_history() -> None:
    llm = native_llm("Bergen has about 290,000 people.")
    history = [
        ChatMessage("user", "Name two Norwegian cities."),
        ChatMessage("assistant", "Oslo and Bergen."),
    ]

    await run_to_done(ReActAgent(llm, tools()), "and the second one?", history)

    sent = [(m.role, m.content) for m in llm.calls[0]["messages"][1:]]
    assert sent == [
        ("user", "Name two Norwegian cities."),
        ("assistant", "Oslo and Bergen."),
        ("user", "and the second one?"),
    ]


async def test_a_stream_broken_after_answer_text_keeps_it_as_an_incomplete_answer() -> None:
    llm = native_llm({"content": "The first half", "stream_error": UnavailableError("reset")})
    seen = Recorder(llm)

    result, _ = await run_to_done(ReActAgent(llm, tools(), on_event=seen))

    assert result.status == "incomplete" and result.stop_reason == "stream_broken"
    assert result.answer == "The first half" == seen.answer_text()
    done = seen.of(Done)[0]
    assert done.status == "incomplete" and "partway" in done.reason


async def test_a_stream_broken_before_any_text_fails_the_run_in_plain_words() -> None:
    llm = native_llm(UnavailableError("connection refused"))

    result = await ReActAgent(llm, tools()).run("q")

    assert result.status == "failed" and result.stop_reason == "llm_error"
    assert "could not be reached" in result.answer


async def test_an_answer_past_the_length_limit_is_cut_and_the_upstream_closed() -> None:
    llm = native_llm("word " * 500)
    seen = Recorder(llm)
    agent = ReActAgent(llm, tools(), on_event=seen, max_answer_tokens=10)

    result, _ = await run_to_done(agent)

    assert result.status == "incomplete" and result.answer == "word " * 8  # 40 characters
    assert llm.calls[0]["closed"] is True
    assert "length limit (10 tokens)" in seen.of(Done)[0].reason


async def test_an_answer_cut_at_its_length_limit_still_counts_its_tokens() -> None:
    """The upstream is closed before the provider's usage chunk: the tokens are estimated
    rather than reported as none."""
    llm = native_llm("word " * 500)
    seen = Recorder(llm)

    await run_to_done(ReActAgent(llm, tools(), on_event=seen, max_answer_tokens=10))

    usage = seen.of(Done)[0].usage
    assert usage["completion_tokens"] == 10  # 40 characters
    assert usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


async def test_a_model_that_cannot_stream_still_answers_in_one_call() -> None:
    llm = ScriptedLLM(["Hello there."], abilities={"tool_call": True, "streaming": False})
    seen = Recorder(llm)

    result, _ = await run_to_done(ReActAgent(llm, tools(), on_event=seen))

    assert [c["method"] for c in llm.calls] == ["chat"]
    assert seen.answer_text() == result.answer == "Hello there."


# ------------------------------------------------------------------------------ JSON mode


async def test_json_final_answer_streams_its_answer_field_as_it_arrives() -> None:
    answer = 'Line one,\nline "two" and caf\u00e9 \u2014 done.'
    reply = json_action(type="final_answer", reasoning="I know this.", answer=answer)
    llm = ScriptedLLM([reply], stream_chunk_delay=0.001)
    seen = Recorder(llm)

    result, _ = await run_to_done(ReActAgent(llm, tools(), on_event=seen))

    assert len(llm.calls) == 1
    assert len(seen.open_at_delta) > 3 and seen.open_at_delta[0] is True
    assert seen.answer_text() == result.answer == answer
    assert "".join(e.content for e in seen.of(ThoughtDelta)) == "I know this."


async def test_stray_json_punctuation_never_starts_an_answer() -> None:
    """A small model writes the closing characters of its action into the answer
    (``"answer": "}\\nThe answer is 391."``): the reader gets the answer, not the debris."""
    reply = json_action(type="final_answer", reasoning="r", answer="},\n The answer is 391.")
    llm = ScriptedLLM([reply], stream_chunk_delay=0.001)
    seen = Recorder(llm)

    result, _ = await run_to_done(ReActAgent(llm, tools(), on_event=seen))

    assert seen.answer_text() == result.answer == "The answer is 391."
    assert not seen.of(AnswerReset)  # cleaned as it streamed, not taken back


async def test_an_answer_that_is_a_json_object_keeps_its_brace() -> None:
    reply = json_action(type="final_answer", reasoning="r", answer='{"ok": true}')
    llm = ScriptedLLM([reply], stream_chunk_delay=0.001)

    result, _ = await run_to_done(ReActAgent(llm, tools()))

    assert result.answer == '{"ok": true}'


async def test_json_tool_call_streams_its_reasoning_as_the_thought_and_no_answer() -> None:
    call = json_action(
        type="tool_call",
        reasoning="I need the population.",
        tool_name="lookup",
        tool_args={"city": "Oslo"},
    )
    final = json_action(type="final_answer", reasoning="Found it.", answer="About 700k.")
    llm = ScriptedLLM([call, final])
    seen = Recorder(llm)

    result, _ = await run_to_done(ReActAgent(llm, tools(), on_event=seen))

    first_thought = [e.content for e in seen.of(ThoughtDelta) if e.iteration == 1]
    assert "".join(first_thought) == "I need the population."
    assert not seen.of(AnswerReset)  # nothing of the tool call showed as the answer
    assert result.steps[0].tool_args == {"city": "Oslo"}
    assert seen.answer_text() == result.answer == "About 700k."


async def test_json_answer_before_its_type_streams_once_the_type_is_known() -> None:
    reply = '{"answer": "Forty-two.", "reasoning": "known", "type": "final_answer"}'
    llm = ScriptedLLM([reply])
    seen = Recorder(llm)

    result, _ = await run_to_done(ReActAgent(llm, tools(), on_event=seen))

    assert seen.answer_text() == result.answer == "Forty-two."


async def test_json_in_a_code_fence_streams_too() -> None:
    reply = (
        "```json\n" + json_action(type="final_answer", reasoning="r", answer="Fenced.") + "\n```"
    )
    llm = ScriptedLLM([reply], stream_chunk_delay=0.001)
    seen = Recorder(llm)

    result, _ = await run_to_done(ReActAgent(llm, tools(), on_event=seen))

    assert seen.open_at_delta and seen.open_at_delta[0] is True
    assert seen.answer_text() == result.answer == "Fenced."


async def test_classic_text_actions_answer_once_the_reply_is_read() -> None:
    llm = ScriptedLLM(["Thought: easy.\nFinish[Paris is the capital of France.]"])
    seen = Recorder(llm)

    result, _ = await run_to_done(ReActAgent(llm, tools(), on_event=seen))

    assert seen.open_at_delta == [False]
    assert seen.answer_text() == result.answer == "Paris is the capital of France."


async def test_a_follow_up_sent_while_the_answer_streams_is_left_for_the_next_run() -> None:
    """The user watched this answer being written: it stands, and the follow-up is asked
    next (a follow-up sent before the answer began would defer it instead)."""
    queue = InterruptQueue()
    llm = native_llm("A complete answer to the first question.")
    seen = Recorder(llm)

    def send_follow_up(event: AgentEvent) -> None:
        seen(event)
        if isinstance(event, AnswerStart):
            queue.put("and also this?")

    agent = ReActAgent(llm, tools(), on_event=send_follow_up, interrupt_queue=queue)
    result, _ = await run_to_done(agent)

    assert len(llm.calls) == 1 and not seen.of(AnswerReset)
    assert result.answer == "A complete answer to the first question."
    assert result.pending_injections == ["and also this?"]
