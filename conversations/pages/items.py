"""What a run's render state is made of (tool cards, step entries, moved follow-ups) and
the partials template they render with: shared by the run view and the plan view, which
each build them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.template.loader import render_to_string

from conversations.pages.arguments import CodeArgument, code_arguments, other_arguments
from engine.approval import DENIED, EXPIRED, refusal

PARTIALS = "conversations/partials.html"
OBSERVATION_PREVIEW_CHARS = 1_500
ARTIFACT_MARKER = re.compile(r"\[Artifact generated: ([^\]]+)\]")


# A call the user did not approve ends with the engine's refusal as its error: shown as
# what the user decided (or let expire), never as the tool's failure.
_NOT_APPROVED = {refusal(DENIED): DENIED, refusal(EXPIRED): EXPIRED}


def partial(name: str, context: dict[str, Any]) -> str:
    return render_to_string(f"{PARTIALS}#{name}", context)


def card_state(*, done: bool, error: str | None, waiting: bool = False) -> str:
    """A tool card's state, its CSS class and status word: running (or waiting, while the
    user is asked to approve the call), ok, failed, or denied / expired for a call the
    user did not approve (it was not run)."""
    if not done:
        return "waiting" if waiting else "running"
    if not error:
        return "ok"
    return _NOT_APPROVED.get(error, "failed")


@dataclass
class ToolCard:
    dom_id: str
    iteration: int
    tool_name: str
    tool_args: dict[str, Any]
    observation: str = ""
    error: str | None = None
    elapsed: float | None = None
    done: bool = False
    waiting: bool = False  # for the user's approval: the call has not started

    @property
    def state(self) -> str:
        return card_state(done=self.done, error=self.error, waiting=self.waiting)

    @property
    def code_arguments(self) -> list[CodeArgument]:
        """The arguments shown as code blocks (a python call's code), not as JSON."""
        return code_arguments(self.tool_name, self.tool_args)

    @property
    def other_arguments(self) -> Any:
        """The arguments shown as indented JSON: all the others."""
        return other_arguments(self.tool_name, self.tool_args)

    @property
    def observation_preview(self) -> str:
        return self.observation[:OBSERVATION_PREVIEW_CHARS]

    @property
    def observation_truncated(self) -> bool:
        return len(self.observation) > OBSERVATION_PREVIEW_CHARS

    @property
    def run_id(self) -> int:
        return int(self.dom_id.split("-")[1])

    @property
    def artifact_names(self) -> list[str]:
        """Names from the "[Artifact generated: a, b]" summary the tool returned."""
        match = ARTIFACT_MARKER.search(self.observation)
        return [n.strip() for n in match.group(1).split(",")] if match else []


@dataclass
class FollowupMessage:
    """A follow-up moved to the run answering it, as the user-message partial shows it."""

    id: int
    content: str
    pinned: bool = False

    @property
    def pk(self) -> int:
        return self.id


@dataclass
class StepItem:
    """An entry of the steps area, in event order."""

    kind: str  # card | thought | inject | compact | approval | plan
    card: ToolCard | None = None
    text: str = ""
    dom_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
