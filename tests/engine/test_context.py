"""ContextGuard, token estimates and smart_truncate (engine/context.py), no DB needed."""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from typing import Any

import pytest

from engine.cancel import CancelledRun
from engine.context import (
    COMPACTION_HINTS,
    DEFAULT_BUDGET_TOKENS,
    SUMMARY_PREFIX,
    TOOL_RESULT_CLEARED,
    TRUNCATED_MARKER,
    CompactionResult,
    ContextGuard,
    estimate_messages_tokens,
    estimate_tokens,
    hint_prompt,
    model_budget,
    smart_truncate,
)
from engine.llm.base import ChatResponse, default_abilities
from engine.messages import ChatMessage, ToolCall

LANGUAGE_RULE = "Write in the same language as the conversation."


# --------------------------------------------------------------------------- helpers


class RecordingLLM:
    """A summariser double: records what it was sent; can raise or answer empty."""

    def __init__(self, reply: str = "SUMMARY OF EARLIER WORK", *, error: Exception | None = None):
        self.abilities = default_abilities()
        self.reply = reply
        self.error = error
        self.calls: list[list[ChatMessage]] = []

    async def chat(self, messages: Sequence[ChatMessage], **opts: Any) -> ChatResponse:
        self.calls.append(list(messages))
        if self.error is not None:
            raise self.error
        return ChatResponse(content=self.reply)

    async def stream_chat(self, messages: Sequence[ChatMessage], **opts: Any):  # pragma: no cover
        raise NotImplementedError
        yield

    def received_text(self) -> str:
        return "\n".join(m.text() for call in self.calls for m in call)


def sys_msg(text: str = "You are a helpful agent.") -> ChatMessage:
    return ChatMessage(role="system", content=text)


def user(text: str, *, pinned: bool = False) -> ChatMessage:
    return ChatMessage(role="user", content=text, pinned=pinned)


def assistant(text: str = "") -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


def tool_group(call_ids: list[str], result: str) -> list[ChatMessage]:
    calls = [ToolCall(id=cid, name="search", arguments={"q": cid}) for cid in call_ids]
    out = [ChatMessage(role="assistant", content="", tool_calls=calls)]
    out += [
        ChatMessage(role="tool", content=f"{result} ({cid})", tool_call_id=cid, name="search")
        for cid in call_ids
    ]
    return out


def assert_invariants(out: list[ChatMessage]) -> None:
    """No orphan tool result, no call without all its results, history opens with user."""
    for index, message in enumerate(out):
        if message.role == "tool":
            assert any(
                prev.role == "assistant"
                and any(call.id == message.tool_call_id for call in prev.tool_calls or ())
                for prev in out[:index]
            ), f"tool result {message.tool_call_id} without its call"
        if message.role == "assistant" and message.tool_calls:
            ids = {call.id for call in message.tool_calls}
            following = out[index + 1 : index + 1 + len(ids)]
            got = {m.tool_call_id for m in following if m.role == "tool"}
            assert got == ids, f"call {ids} separated from its results"
    history = [m for m in out if m.role != "system"]
    if history:
        assert history[0].role == "user", f"history starts with {history[0].role}"


def summary_messages(out: list[ChatMessage]) -> list[ChatMessage]:
    return [m for m in out if m.role == "system" and m.text().startswith(SUMMARY_PREFIX)]


def native_loop(groups: int, result_chars: int = 600) -> list[ChatMessage]:
    """A native tool loop under a pinned query, the agent's usual shape."""
    msgs = [sys_msg(), user("PINNED-QUERY what are the totals?", pinned=True)]
    for g in range(groups):
        msgs += tool_group([f"c{g}"], f"result {g} " + "x" * result_chars)
    return msgs


# --------------------------------------------------------------------------- estimates


def test_ascii_estimate_is_chars_over_four():
    assert estimate_tokens("abcd" * 10) == 10
    assert estimate_tokens("a") == 1
    assert estimate_tokens("") == 0
    assert estimate_tokens(None) == 0


def test_cjk_estimate_is_chars_over_one_and_a_half():
    assert estimate_tokens("中" * 30) == 20
    assert estimate_tokens("日本語のテキスト" * 3) == 16
    assert estimate_tokens("ab中文") == 2  # 0.5 + 1.33 -> 2


def test_image_part_costs_765():
    content = [
        {"type": "text", "text": "abcd" * 5},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
    ]
    assert estimate_tokens(content) == 5 + 765
    assert estimate_tokens([{"type": "image_url", "image_url": {"url": "x"}}] * 2) == 1530


def test_message_estimate_adds_overhead_and_tool_calls():
    assert estimate_messages_tokens([user("abcd" * 10)]) == 14
    assert estimate_messages_tokens([user(""), user("")]) == 8
    call = ToolCall(id="1", name="abcd", arguments={"q": "x" * 100})
    with_call = ChatMessage(role="assistant", content="", tool_calls=[call])
    arguments = '{"q": "' + "x" * 100 + '"}'
    assert estimate_messages_tokens([with_call]) == 4 + 1 + estimate_tokens(arguments)


def test_model_budget():
    assert DEFAULT_BUDGET_TOKENS == 32_000
    assert model_budget(128_000, 4_096) == 123_904
    assert model_budget(None, 4_096) == DEFAULT_BUDGET_TOKENS
    assert model_budget(6_000, 4_096) == 4_000
    assert model_budget(8_192, None) == 8_192


# --------------------------------------------------------------------------- hint prompts


def test_hint_prompts_exist_and_end_with_language_rule():
    assert set(COMPACTION_HINTS) == {
        "react_iteration",
        "planner_input",
        "step_dependency",
        "general",
    }
    for prompt in COMPACTION_HINTS.values():
        assert prompt.endswith(LANGUAGE_RULE)


def test_hint_prompts_say_what_to_keep_and_drop():
    react = COMPACTION_HINTS["react_iteration"].lower()
    for phrase in ("reasoning chain", "tool results", "goal", "sub-goal", "exact numbers"):
        assert phrase in react
    for phrase in ("identifiers", "error", "failed attempts", "already summarised"):
        assert phrase in react
    planner = COMPACTION_HINTS["planner_input"].lower()
    for phrase in ("intent evolved", "decisions", "constraints", "data", "greetings"):
        assert phrase in planner
    assert "tool calls" in planner
    step = COMPACTION_HINTS["step_dependency"].lower()
    for phrase in ("outputs", "numbers", "conclusions", "next step"):
        assert phrase in step
    general = COMPACTION_HINTS["general"].lower()
    for phrase in ("one concise paragraph", "facts", "decisions", "tool results"):
        assert phrase in general


def test_unknown_hint_uses_general():
    assert hint_prompt("no-such-hint") == COMPACTION_HINTS["general"]
    assert hint_prompt(None) == COMPACTION_HINTS["general"]
    assert hint_prompt("planner_input") == COMPACTION_HINTS["planner_input"]


# --------------------------------------------------------------------------- the guard


async def test_under_budget_returns_the_same_list():
    llm = RecordingLLM()
    guard = ContextGuard(budget_tokens=10_000, compact_llm=llm)
    msgs = native_loop(3, 100)
    out = await guard.check_and_compact(msgs)
    assert out is msgs
    assert llm.calls == []
    assert guard.last_compaction is None


async def test_oversized_message_is_cut_with_marker():
    llm = RecordingLLM()
    guard = ContextGuard(budget_tokens=14_000, compact_llm=llm, max_message_chars=50_000)
    big = user("y" * 60_000)
    msgs = [sys_msg(), big]
    out = await guard.check_and_compact(msgs)
    assert out[1].text() == "y" * 50_000 + TRUNCATED_MARKER
    assert out[1].text().endswith("\n[Truncated]")
    assert big.text() == "y" * 60_000  # the input is never modified
    assert llm.calls == []
    assert guard.last_compaction is not None
    assert guard.last_compaction.method == "cut"


async def test_oversized_multipart_text_is_cut_and_image_kept():
    guard = ContextGuard(budget_tokens=2_000, max_message_chars=1_000)
    image = {"type": "image_url", "image_url": {"url": "data:,x"}}
    msgs = [
        user("hi"),
        ChatMessage(role="user", content=[{"type": "text", "text": "z" * 9_000}, image]),
    ]
    out = await guard.check_and_compact(msgs)
    parts = out[-1].content
    assert isinstance(parts, list)
    assert parts[0]["text"] == "z" * 1_000 + TRUNCATED_MARKER
    assert parts[1] == image


async def test_old_tool_results_are_cleared_before_summarising():
    llm = RecordingLLM()
    msgs = native_loop(10, 2_000)
    guard = ContextGuard(budget_tokens=4_000, compact_llm=llm, max_tool_results=6)
    out = await guard.check_and_compact(msgs)
    results = [m for m in out if m.role == "tool"]
    assert [m.text() for m in results[:4]] == [TOOL_RESULT_CLEARED] * 4
    assert all(m.text().startswith("result") for m in results[4:])
    assert len(results) == 10
    assert llm.calls == []
    assert guard.last_compaction.method == "cleared"
    assert_invariants(out)


async def test_observations_count_as_tool_results():
    msgs = [sys_msg(), user("question", pinned=True)]
    for i in range(5):
        msgs += [
            assistant(f'{{"type":"tool_call","tool_name":"t{i}"}}'),
            user("Observation: " + "o" * 2_000),
        ]
    guard = ContextGuard(budget_tokens=1_500, max_tool_results=2)
    out = await guard.check_and_compact(msgs)
    observations = [m.text() for m in out if m.text().startswith("Observation:")]
    assert observations[:3] == [f"Observation: {TOOL_RESULT_CLEARED}"] * 3
    assert all(len(o) > 1_000 for o in observations[3:])


async def test_summary_layout_and_summariser_input():
    llm = RecordingLLM("the totals so far are 42")
    msgs = native_loop(8, 1_200)
    guard = ContextGuard(budget_tokens=1_600, compact_llm=llm, keep_recent=4)
    out = await guard.check_and_compact(msgs)

    assert out[0] is msgs[0]
    assert out[1].text() == "PINNED-QUERY what are the totals?" and out[1].pinned
    assert out[2].role == "system"
    assert out[2].text() == f"{SUMMARY_PREFIX} the totals so far are 42"
    assert out[3:] == msgs[-4:]
    assert_invariants(out)

    assert len(llm.calls) == 1
    request = llm.calls[0]
    assert [m.role for m in request] == ["system", "user"]
    assert request[0].text() == COMPACTION_HINTS["react_iteration"]
    body = request[1].text()
    assert TOOL_RESULT_CLEARED in body  # results 0 and 1 were cleared first (6 kept)
    assert "result 2" in body and "result 5" in body
    assert "result 6" not in body
    assert "PINNED-QUERY" not in llm.received_text()

    result = guard.last_compaction
    assert isinstance(result, CompactionResult)
    assert result.summary == "the totals so far are 42"
    assert result.original_messages == len(msgs)
    assert result.kept_messages == len(out)
    assert result.summarised_count == 12
    assert result.covered_until == len(msgs) - 5
    assert result.method == "summary"


async def test_pinned_messages_anywhere_never_reach_the_summariser():
    llm = RecordingLLM()
    msgs = [sys_msg(), user("PIN-A first question", pinned=True), assistant("answer A " * 50)]
    msgs += [user("plain question " * 30), assistant("plain answer " * 40)]
    msgs += [user("PIN-B important constraint", pinned=True), assistant("ok " * 80)]
    msgs += [user("another " * 40), assistant("reply " * 40), user("latest?"), assistant("yes")]
    guard = ContextGuard(budget_tokens=350, compact_llm=llm, keep_recent=2)
    out = await guard.check_and_compact(msgs, hint="general")
    assert llm.calls, "expected a summary"
    assert "PIN-A" not in llm.received_text() and "PIN-B" not in llm.received_text()
    texts = [m.text() for m in out]
    assert "PIN-A first question" in texts and "PIN-B important constraint" in texts
    assert llm.calls[0][0].text() == COMPACTION_HINTS["general"]
    assert_invariants(out)


async def test_tool_groups_around_the_boundary_stay_whole():
    llm = RecordingLLM()
    msgs = [sys_msg(), user("PIN query", pinned=True)]
    msgs += tool_group(["a1", "a2", "a3"], "r" * 400)
    msgs += tool_group(["b1"], "s" * 400)
    msgs += tool_group(["c1", "c2"], "t" * 400)
    msgs += tool_group(["d1", "d2", "d3"], "u" * 400)
    for keep in range(0, 9):
        llm.calls.clear()
        guard = ContextGuard(budget_tokens=700, compact_llm=llm, keep_recent=keep)
        out = await guard.check_and_compact(msgs)
        assert_invariants(out)
        assert summary_messages(out), f"keep_recent={keep} fell back to truncation"
        recent = out[out.index(summary_messages(out)[0]) + 1 :]
        assert not recent or recent[0].role != "tool"
        sent = llm.received_text()
        kept_ids = {m.tool_call_id for m in recent if m.role == "tool"}
        for cid in kept_ids:
            assert f"({cid})" not in sent  # a kept group was not also half-summarised


async def test_recent_part_never_starts_with_assistant_without_a_user_before_it():
    llm = RecordingLLM()
    msgs = [sys_msg(), user("first " * 60), assistant("one " * 60), user("second " * 60)]
    msgs += tool_group(["x1"], "v" * 300) + tool_group(["x2"], "w" * 300)
    msgs += [assistant("final " * 30)]
    assert estimate_messages_tokens(msgs) > 450
    guard = ContextGuard(budget_tokens=450, compact_llm=llm, keep_recent=3)
    out = await guard.check_and_compact(msgs)
    assert_invariants(out)
    summary = summary_messages(out)[0]
    recent = out[out.index(summary) + 1 :]
    assert recent[0].role == "user" and recent[0].text().startswith("second")


async def test_unpinned_query_is_kept_as_anchor_in_a_long_tool_loop():
    llm = RecordingLLM()
    msgs = [sys_msg(), user("ANCHOR question")]
    for g in range(12):
        msgs += tool_group([f"g{g}"], "data " * 100)
    guard = ContextGuard(budget_tokens=900, compact_llm=llm, keep_recent=4)
    out = await guard.check_and_compact(msgs)
    assert_invariants(out)
    assert summary_messages(out)
    history = [m for m in out if m.role != "system"]
    assert history[0].text() == "ANCHOR question"
    assert out[-1] is msgs[-1]


async def test_fallback_on_summariser_exception():
    llm = RecordingLLM(error=RuntimeError("summariser down"))
    msgs = native_loop(10, 1_000)
    guard = ContextGuard(budget_tokens=1_200, compact_llm=llm)
    out = await guard.check_and_compact(msgs)
    assert llm.calls
    assert summary_messages(out) == []
    assert estimate_messages_tokens(out) <= 1_200
    assert out[-1] is msgs[-1]
    assert out[1].text().startswith("PINNED-QUERY")
    assert_invariants(out)
    assert guard.last_compaction.method == "truncate"
    assert guard.last_compaction.summary is None


@pytest.mark.parametrize("reply", ["", "   \n", "<think>hmm, let me see</think>"])
async def test_fallback_on_empty_summary(reply: str):
    llm = RecordingLLM(reply)
    msgs = native_loop(10, 1_000)
    guard = ContextGuard(budget_tokens=1_200, compact_llm=llm)
    out = await guard.check_and_compact(msgs)
    assert llm.calls
    assert summary_messages(out) == []
    assert estimate_messages_tokens(out) <= 1_200
    assert_invariants(out)


async def test_think_block_is_stripped_from_summary():
    llm = RecordingLLM("<think>drafting</think>\nThe real summary.")
    guard = ContextGuard(budget_tokens=1_200, compact_llm=llm)
    out = await guard.check_and_compact(native_loop(10, 1_000))
    assert summary_messages(out)[0].text() == f"{SUMMARY_PREFIX} The real summary."


async def test_no_compaction_llm_truncates():
    msgs = native_loop(10, 1_000)
    guard = ContextGuard(budget_tokens=1_200)
    out = await guard.check_and_compact(msgs)
    assert estimate_messages_tokens(out) <= 1_200
    assert summary_messages(out) == []
    assert_invariants(out)


async def test_cancellation_is_not_swallowed():
    guard = ContextGuard(budget_tokens=1_200, compact_llm=RecordingLLM(error=CancelledRun("stop")))
    with pytest.raises(CancelledRun):
        await guard.check_and_compact(native_loop(10, 1_000))


async def test_summary_still_over_budget_is_truncated():
    llm = RecordingLLM("short summary")
    msgs = native_loop(8, 3_000)
    guard = ContextGuard(budget_tokens=1_000, compact_llm=llm, keep_recent=6, max_tool_results=6)
    out = await guard.check_and_compact(msgs)
    assert estimate_messages_tokens(out) <= 1_000
    assert summary_messages(out)
    assert guard.last_compaction.method == "summary+truncate"
    assert_invariants(out)


async def test_pinned_overflow_releases_older_pins():
    llm = RecordingLLM()
    msgs = [sys_msg()]
    msgs += [user("OLD-PIN-1 " + "a" * 1_200, pinned=True), assistant("ok " * 50)]
    msgs += [user("OLD-PIN-2 " + "b" * 1_200, pinned=True), assistant("ok " * 50)]
    msgs += [user("QUERY current question", pinned=True)]
    msgs += tool_group(["q1"], "found " * 40)
    msgs += [user("[USER INTERRUPT]: OLD-INTERRUPT " + "c" * 600, pinned=True)]
    msgs += tool_group(["q2"], "more " * 40)
    msgs += [user("[USER INTERRUPT]: NEW-INTERRUPT also check X", pinned=True)]
    msgs += tool_group(["q3"], "last " * 40)
    guard = ContextGuard(budget_tokens=1_000, compact_llm=llm, keep_recent=2)
    out = await guard.check_and_compact(msgs)

    still_pinned = [m.text() for m in out if m.pinned]
    assert "QUERY current question" in still_pinned
    assert "[USER INTERRUPT]: NEW-INTERRUPT also check X" in still_pinned
    assert not any("OLD-PIN" in t or "OLD-INTERRUPT" in t for t in still_pinned)
    sent = llm.received_text()
    assert "OLD-PIN-1" in sent and "OLD-PIN-2" in sent  # released to compaction
    assert "QUERY current question" not in sent and "NEW-INTERRUPT" not in sent
    assert all(m.pinned for m in msgs if "PIN" in m.text() or "INTERRUPT" in m.text())
    assert_invariants(out)


async def test_pins_within_half_the_budget_are_all_kept():
    llm = RecordingLLM()
    msgs = [sys_msg(), user("PIN-1 small", pinned=True), assistant("a " * 300)]
    msgs += [user("PIN-2 small", pinned=True), assistant("b " * 300), user("now?"), assistant("c")]
    guard = ContextGuard(budget_tokens=300, compact_llm=llm, keep_recent=2)
    out = await guard.check_and_compact(msgs)
    assert [m.text() for m in out if m.pinned] == ["PIN-1 small", "PIN-2 small"]
    assert "PIN-" not in llm.received_text()


async def test_single_oversized_pin_is_not_released():
    llm = RecordingLLM()
    msgs = [sys_msg(), user("ONLY-PIN " + "p" * 2_000, pinned=True)]
    msgs += tool_group(["z1"], "r" * 800) + tool_group(["z2"], "r" * 800)
    guard = ContextGuard(budget_tokens=900, compact_llm=llm, keep_recent=2)
    out = await guard.check_and_compact(msgs)
    assert any(m.pinned and m.text().startswith("ONLY-PIN") for m in out)
    assert "ONLY-PIN" not in llm.received_text()


async def test_budget_override_for_one_call():
    llm = RecordingLLM()
    msgs = native_loop(8, 1_000)
    guard = ContextGuard(budget_tokens=100_000, compact_llm=llm)
    assert await guard.check_and_compact(msgs) is msgs
    half = estimate_messages_tokens(msgs) // 2
    out = await guard.check_and_compact(msgs, budget_tokens=half)
    assert out is not msgs
    assert estimate_messages_tokens(out) <= half
    assert guard.budget_tokens == 100_000  # the override does not stick
    assert await guard.check_and_compact(msgs) is msgs


async def test_hint_selects_the_summariser_prompt():
    for hint, expected in [
        ("planner_input", COMPACTION_HINTS["planner_input"]),
        ("step_dependency", COMPACTION_HINTS["step_dependency"]),
        ("whatever", COMPACTION_HINTS["general"]),
    ]:
        llm = RecordingLLM()
        guard = ContextGuard(budget_tokens=1_200, compact_llm=llm)
        await guard.check_and_compact(native_loop(10, 1_000), hint=hint)
        assert llm.calls[0][0].text() == expected


async def test_input_list_and_messages_are_not_mutated():
    msgs = native_loop(10, 1_500)
    snapshot = copy.deepcopy(msgs)
    guard = ContextGuard(budget_tokens=1_200, compact_llm=RecordingLLM())
    await guard.check_and_compact(msgs)
    assert msgs == snapshot


# --------------------------------------------------------------------------- incremental


async def test_summarise_passes_the_previous_summary():
    llm = RecordingLLM("updated summary")
    guard = ContextGuard(compact_llm=llm)
    newer = [user("NEW question about Y"), assistant("Y is 7")]
    text = await guard.summarise(newer, "general", previous_summary="OLD SUMMARY: X is 3")
    assert text == "updated summary"
    request = llm.calls[0]
    assert request[0].text() == COMPACTION_HINTS["general"]
    body = request[1].text()
    assert "OLD SUMMARY: X is 3" in body and "NEW question about Y" in body and "Y is 7" in body
    assert body.index("OLD SUMMARY") < body.index("NEW question")
    assert "extend" in body.lower()


async def test_summarise_without_previous_summary():
    llm = RecordingLLM("s")
    guard = ContextGuard(compact_llm=llm)
    await guard.summarise([user("hello there")], "react_iteration")
    assert "earlier conversation" not in llm.calls[0][1].text().lower()
    assert "hello there" in llm.calls[0][1].text()


async def test_summarise_without_llm_raises():
    with pytest.raises(RuntimeError):
        await ContextGuard().summarise([user("x")], "general")


async def test_compact_returns_the_summary_and_counts():
    llm = RecordingLLM("stored summary")
    msgs = [sys_msg()] + [
        m for i in range(12) for m in (user(f"q{i} " * 40), assistant(f"a{i} " * 40))
    ]
    msgs.append(user("current question", pinned=True))
    guard = ContextGuard(budget_tokens=800, compact_llm=llm, keep_recent=4)
    result = await guard.compact(msgs, hint="planner_input", budget_tokens=800)
    assert result.summary == "stored summary"
    assert result.original_messages == len(msgs)
    assert result.kept_messages == len(result.messages)
    assert result.summarised_count > 0
    assert result.covered_until is not None and result.covered_until < len(msgs) - 4
    assert llm.calls[0][0].text() == COMPACTION_HINTS["planner_input"]
    assert_invariants(result.messages)


async def test_compact_under_budget_is_unchanged():
    llm = RecordingLLM()
    msgs = [sys_msg(), user("hi")]
    result = await ContextGuard(compact_llm=llm).compact(msgs, hint="general")
    assert result.method == "unchanged" and result.summary is None
    assert result.messages == msgs and llm.calls == []


async def test_compact_extends_a_previous_summary_argument():
    llm = RecordingLLM("new")
    msgs = [sys_msg()]
    msgs += [m for i in range(10) for m in (user(f"q{i} " * 80), assistant("a " * 80))]
    guard = ContextGuard(budget_tokens=600, compact_llm=llm)
    await guard.compact(msgs, hint="general", previous_summary="PREVIOUS STORED SUMMARY")
    assert "PREVIOUS STORED SUMMARY" in llm.calls[0][1].text()


async def test_existing_summary_message_is_extended_not_stacked():
    llm = RecordingLLM("second summary")
    msgs = [sys_msg(), user("Q", pinned=True), sys_msg(f"{SUMMARY_PREFIX} first summary")]
    for g in range(10):
        msgs += tool_group([f"k{g}"], "z" * 1_000)
    guard = ContextGuard(budget_tokens=1_200, compact_llm=llm)
    out = await guard.check_and_compact(msgs)
    assert [m.text() for m in summary_messages(out)] == [f"{SUMMARY_PREFIX} second summary"]
    body = llm.calls[0][1].text()
    assert "first summary" in body
    assert body.index("first summary") < body.index("[tool result")


# --------------------------------------------------------------------------- smart_truncate


def test_smart_truncate_keeps_system_and_pins_and_newest():
    msgs = [sys_msg(), user("PIN", pinned=True)]
    for i in range(10):
        msgs += [user(f"u{i} " * 50), assistant(f"a{i} " * 50)]
    out = smart_truncate(msgs, 500)
    assert out[0] is msgs[0] and out[1] is msgs[1]
    assert out[-1] is msgs[-1]
    assert estimate_messages_tokens(out) <= 500
    assert_invariants(out)


def test_smart_truncate_never_starts_with_assistant():
    msgs = [sys_msg()]
    for i in range(6):
        msgs += [user(f"u{i} " * 10), assistant(f"a{i} " * 60)]
    for budget in range(60, 800, 7):
        out = smart_truncate(msgs, budget)
        assert_invariants(out)
        assert estimate_messages_tokens(out) <= budget


def test_smart_truncate_never_keeps_half_a_group():
    msgs = [sys_msg(), user("PIN", pinned=True)]
    msgs += tool_group(["a", "b", "c"], "r" * 200) + tool_group(["d", "e"], "s" * 200)
    for budget in range(30, 600, 5):
        assert_invariants(smart_truncate(msgs, budget))


def test_smart_truncate_cuts_a_huge_newest_result():
    msgs = [sys_msg(), user("PIN query", pinned=True)] + tool_group(["big"], "B" * 40_000)
    out = smart_truncate(msgs, 2_000)
    assert [m.role for m in out] == ["system", "user", "assistant", "tool"]
    assert out[-1].text().endswith(TRUNCATED_MARKER)
    assert estimate_messages_tokens(out) <= 2_000


def test_smart_truncate_brings_the_query_along():
    msgs = [sys_msg(), user("the QUESTION")] + [
        m for g in range(10) for m in tool_group([f"t{g}"], "d" * 300)
    ]
    out = smart_truncate(msgs, 600)
    history = [m for m in out if m.role != "system"]
    assert history[0].text() == "the QUESTION"
    assert history[-1] is msgs[-1]
    assert_invariants(out)


def test_smart_truncate_shares_room_between_query_and_huge_result():
    msgs = [sys_msg(), user("QUESTION " + "q" * 2_000)] + tool_group(["h"], "H" * 40_000)
    out = smart_truncate(msgs, 1_000)
    assert [m.role for m in out] == ["system", "user", "assistant", "tool"]
    assert out[1].text().startswith("QUESTION") and out[1].text().endswith(TRUNCATED_MARKER)
    assert out[-1].text().endswith(TRUNCATED_MARKER)
    assert estimate_messages_tokens(out) <= 1_000


# --------------------------------------------------------------------------- property loop


WORDS = ["alpha", "beta", "gamma", "delta", "数据", "結果", "valeur", "42", "error", "path/x"]


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def random_history(rng: random.Random) -> list[ChatMessage]:
    """A plausible history: turns of user, tool groups, interrupts, final answers."""
    msgs = [sys_msg("SYSTEM " + _text(rng, 3, 20))]
    call = 0
    pin = 0
    turns = rng.randint(1, 5)
    for turn in range(turns):
        pinned = rng.random() < 0.3 or turn == turns - 1
        label = f"PINNED#{pin}" if pinned else "plain"
        pin += pinned
        msgs.append(user(f"{label} question {turn} {_text(rng, 1, 60)}", pinned=pinned))
        for _ in range(rng.randint(0, 5)):
            ids = [f"c{call + j}" for j in range(rng.randint(1, 3))]
            call += len(ids)
            msgs += tool_group(ids, _text(rng, 1, 120))
            if rng.random() < 0.15:
                msgs.append(
                    user(f"[USER INTERRUPT]: PINNED#{pin} {_text(rng, 1, 10)}", pinned=True)
                )
                pin += 1
        if turn < turns - 1 or rng.random() < 0.5:
            msgs.append(assistant(_text(rng, 1, 80)))
    return msgs


async def test_invariants_hold_over_many_histories_budgets_and_keep_recent():
    rng = random.Random(20240601)
    checked = summarised = 0
    for _ in range(150):
        msgs = random_history(rng)
        snapshot = copy.deepcopy(msgs)
        pins = [m for m in msgs if m.pinned]
        for budget in (120, 250, 400, 700, 1_200, 2_500):
            keep = rng.randint(0, 7)
            mode = rng.choice(["ok", "ok", "ok", "raise", "empty", "none"])
            llm = {
                "ok": RecordingLLM("SUMMARY"),
                "raise": RecordingLLM(error=ValueError("boom")),
                "empty": RecordingLLM(""),
                "none": None,
            }[mode]
            guard = ContextGuard(
                budget_tokens=budget,
                compact_llm=llm,
                keep_recent=keep,
                max_tool_results=rng.randint(0, 6),
            )
            out = await guard.check_and_compact(msgs)
            checked += 1
            assert msgs == snapshot
            assert_invariants(out)

            released = len(pins) > 1 and estimate_messages_tokens(pins) > budget / 2
            if released:
                query = next(
                    m for m in reversed(pins) if not m.text().startswith("[USER INTERRUPT]")
                )
                interrupts = [m for m in pins if m.text().startswith("[USER INTERRUPT]")]
                protected = [query] + interrupts[-1:]
            else:
                protected = pins
            sent = llm.received_text() if llm else ""
            for message in protected:
                label = next(w for w in message.text().split() if w.startswith("PINNED#"))
                assert f"{label} " not in sent, f"pinned {label} sent to the summariser"
                assert any(m.pinned and m.content == message.content for m in out)
            fixed = estimate_messages_tokens([m for m in msgs if m.role == "system"] + protected)
            if fixed <= budget // 2:
                assert estimate_messages_tokens(out) <= budget
            if summary_messages(out) and mode == "ok" and not summary_messages(msgs):
                summarised += 1
                assert len(summary_messages(out)) == 1
            if out is not msgs:
                assert guard.last_compaction is not None
                assert guard.last_compaction.messages == out
    assert checked == 900
    assert summarised > 100  # the loop really exercises the summary path
