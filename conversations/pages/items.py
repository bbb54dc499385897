"""What a run's render state is made of (tool cards, step entries, moved follow-ups) and
the partials template they render with: shared by the run view and the plan view, which
each build them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.template.loader import render_to_string

PARTIALS = "conversations/partials.html"
OBSERVATION_PREVIEW_CHARS = 1_500
ARTIFACT_MARKER = re.compile(r"\[Artifact generated: ([^\]]+)\]")


def partial(name: str, context: dict[str, Any]) -> str:
    return render_to_string(f"{PARTIALS}#{name}", context)


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
