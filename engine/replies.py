"""How one loop reply shows while it streams: as the answer, or as the step's thought.

A reply's text cannot be told apart until it ends: in native mode, text followed by tool
calls was the step's thought; text without is the answer. Waiting would hold the answer
back for the whole reply, so text streams as the answer at once and, when the reply turns
out to be a step, an ``AnswerReset`` takes it back (the step's ``ThinkingDone`` then shows
it as the thought). In JSON mode the action is parsed while it streams (jiter's partial
mode): a final answer's ``answer`` field streams as the answer, the ``reasoning`` field as
the thought. Reasoning channels (``reasoning_content``) always stream as the thought.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import jiter

from engine.actions import FINAL_ACTIONS, FINAL_KINDS, answer_start
from engine.events import AgentEvent, AnswerDelta, AnswerReset, AnswerStart, ThoughtDelta
from engine.llm.base import ChatDelta

__all__ = ["AnswerOnPage", "JsonReplyPresenter", "NativeReplyPresenter"]

Emit = Callable[[AgentEvent], Awaitable[None]]

# What may come before a JSON action for it to be parsed while it streams: whitespace or a
# code fence. Anything else (the classic "Thought:/Action:" form) is read when it ends.
_JSON_OPENING = re.compile(r"\s*(?:```(?:json)?\s*)?")


@dataclass
class AnswerOnPage:
    """The answer text readers hold: what streamed since the last ``AnswerStart``.

    ``on_start`` is called as an answer starts to show: the loop holds the follow-ups sent
    before that moment (they still change the answer), and leaves the later ones to the
    next run (the user saw this answer being written when they sent them).
    """

    started: bool = False
    text: str = ""
    on_start: Callable[[], None] | None = None

    async def add(self, text: str, emit: Emit) -> None:
        if not text:
            return
        if not self.started:
            text = answer_start(text)  # the answer starts at its first visible character
            if not text:
                return
            self.started = True
            if self.on_start is not None:
                self.on_start()
            await emit(AnswerStart())
        self.text += text
        await emit(AnswerDelta(text))

    async def reset(self, emit: Emit) -> None:
        if self.started:
            self.started, self.text = False, ""
            await emit(AnswerReset())

    async def settle(self, answer: str, emit: Emit) -> str:
        """Make the page's answer ``answer``; the answer as readers hold it.

        Usually the answer streamed whole (or all but a tail the parser held back), and
        what is missing is sent; otherwise it is sent again from the start. Whitespace at
        either end is not worth a resend.
        """
        if self.text and answer.startswith(self.text):
            await self.add(answer[len(self.text) :], emit)
        elif self.text and self.text.strip() == answer.strip():
            pass
        else:
            await self.reset(emit)
            await self.add(answer, emit)
        return self.text


class _Presenter:
    def __init__(self, iteration: int, page: AnswerOnPage, emit: Emit, *, answer_live: bool):
        self.iteration = iteration
        self.page = page
        self.emit = emit
        # False when the answer is rewritten after tools: its draft streams as the thought.
        self.answer_live = answer_live
        self.thought = ""  # streamed as the step's thought

    async def _thought(self, text: str) -> None:
        if text:
            self.thought += text
            await self.emit(ThoughtDelta(self.iteration, text))

    async def feed(self, delta: ChatDelta) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class NativeReplyPresenter(_Presenter):
    """Native mode: text is the answer until tool calls say otherwise."""

    async def feed(self, delta: ChatDelta) -> None:
        await self._thought(delta.reasoning_content)
        if not delta.content:
            return
        if self.answer_live:
            await self.page.add(delta.content, self.emit)
        else:
            await self._thought(delta.content)


class JsonReplyPresenter(_Presenter):
    """JSON mode: the action parsed as it streams."""

    def __init__(self, iteration: int, page: AnswerOnPage, emit: Emit, *, answer_live: bool):
        super().__init__(iteration, page, emit, answer_live=answer_live)
        self.content = ""
        self.streaming_json: bool | None = None  # None: not decided yet
        self.reasoning_shown = 0
        self.answer_shown = 0

    async def feed(self, delta: ChatDelta) -> None:
        await self._thought(delta.reasoning_content)
        if not delta.content:
            return
        self.content += delta.content
        action = self._partial_action()
        if action is None:
            return
        reasoning = _string(action.get("reasoning")) or _string(action.get("thought"))
        if len(reasoning) > self.reasoning_shown:
            await self._thought(reasoning[self.reasoning_shown :])
            self.reasoning_shown = len(reasoning)
        answer = _final_answer(action)
        if answer is not None and self.answer_live and len(answer) > self.answer_shown:
            await self.page.add(answer[self.answer_shown :], self.emit)
            self.answer_shown = len(answer)

    def _partial_action(self) -> dict[str, Any] | None:
        """The action so far, with its last string cut where the stream is; ``_complete``
        marks whether the kind of action is known (a complete ``type`` or ``action``)."""
        if self.streaming_json is False:
            return None
        start = self.content.find("{")
        if start < 0:
            if self.content.strip() and not _JSON_OPENING.fullmatch(self.content):
                self.streaming_json = False
            return None
        if not _JSON_OPENING.fullmatch(self.content[:start]):
            self.streaming_json = False
            return None
        self.streaming_json = True
        data = self.content[start:].encode()
        try:
            partial = jiter.from_json(data, partial_mode="trailing-strings")
            complete = jiter.from_json(data, partial_mode="on")
        except ValueError:  # past the object's end, or not JSON after all: read at the end
            return None
        if not isinstance(partial, dict) or not isinstance(complete, dict):
            return None
        partial["_complete"] = complete
        return partial


def _final_answer(action: dict[str, Any]) -> str | None:
    """The streamed answer of a final-answer action (None: not known to be one yet)."""
    complete = action["_complete"]
    kind = _string(complete.get("type")).strip().lower()
    if kind in FINAL_KINDS:
        for key in ("answer", "final_answer"):
            if isinstance(action.get(key), str):
                return action[key]
        return ""
    name = _string(complete.get("action")).strip().lower()
    if not kind and name in FINAL_ACTIONS:
        return _string(action.get("action_input"))
    return None


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""
