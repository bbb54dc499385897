"""How far a run got, as data read from its events: the answer text it streamed, the
tool calls it began and did not end, the follow-ups it took in.

The process executing a run keeps one as it publishes (a Stop or a deadline keeps the
answer so far), and a sweep replays a dead run's logged events into one to close its
open tool calls and keep its partial answer. Rendering is not its job: the web server
turns events into HTML (:mod:`conversations.pages.rendering`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RunProgress"]


@dataclass
class RunProgress:
    answer_text: str = ""
    # (iteration, tool name) -> calls begun and not ended
    open_calls: Counter[tuple[int, str]] = field(default_factory=Counter)
    injects_taken: int = 0  # follow-ups the agent took in (one ``inject`` event each)

    @classmethod
    def replay(cls, events: Iterable[tuple[str, dict[str, Any]]]) -> RunProgress:
        """The progress ``events`` (channel, payload), in order, show."""
        progress = cls()
        for channel, payload in events:
            progress.apply(channel, payload)
        return progress

    def apply(self, channel: str, payload: dict[str, Any]) -> None:
        if channel == "answer":
            self._answer(payload)
        elif channel == "step" and payload.get("type") == "iteration":
            key = (int(payload.get("iteration") or 0), str(payload.get("tool_name") or ""))
            if payload.get("status") == "start":
                self.open_calls[key] += 1
            elif self.open_calls[key] > 0:
                self.open_calls[key] -= 1
        elif channel == "inject":
            self.injects_taken += 1
        elif channel == "error":
            self.open_calls.clear()
        elif channel == "handover":  # another worker goes on: it writes the answer again
            self.answer_text = ""
            self.open_calls.clear()
        elif channel == "done" and payload.get("answer") and not self.answer_text:
            self.answer_text = payload["answer"]

    def _answer(self, payload: dict[str, Any]) -> None:
        status = payload.get("status")
        if status == "reset":  # what streamed was a step's thought
            self.answer_text = ""
        elif status == "delta":
            self.answer_text += payload.get("content", "")

    def unfinished_calls(self) -> list[tuple[int, str]]:
        """(iteration, tool name) of each call begun and not ended, in the order begun."""
        return [key for key, count in self.open_calls.items() for _ in range(count)]
