"""A small conversation tree built from rows, for the export and sharing tests.

    Q1 -> R1 "Answer one"
          ├─ Q2 -> R2 "Old answer two"          (the first answer to Q2)
          ├─ Q2 -> R3 "New answer two", a tool call   (regenerated; selected)
          └─ Q2b -> R4 "Answer to the edit"     (an edited question)

The selected branch is R1, R3: Q1, "Answer one", Q2, "New answer two".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from conversations import services
from conversations.models import Conversation, Message, Run, RunEvent

TOOL_ARGS = {"expression": "17*3"}
TOOL_RESULT = "51"


@dataclass
class Tree:
    conversation: Conversation
    runs: dict[str, Run]
    messages: dict[str, Message]


def _run(conversation, trigger, parent, *, minutes: int, status=Run.Status.SUCCEEDED) -> Run:
    run = Run.objects.create(
        conversation=conversation,
        trigger_message=trigger,
        parent=parent,
        status=status,
        iterations=1,
        usage={"total_tokens": 42},
        elapsed=1.5,
        selected_at=timezone.now() - timedelta(hours=1) + timedelta(minutes=minutes),
        finished_at=timezone.now(),
    )
    if trigger.run_id is None:
        trigger.run = run
        trigger.save(update_fields=["run"])
    return run


def _say(conversation, role: str, content: str, run: Run | None = None) -> Message:
    return services.message_create(conversation=conversation, role=role, content=content, run=run)


def build_tree(owner, title: str = "Trip plan") -> Tree:
    conversation = services.conversation_create(owner=owner, title=title)
    q1 = _say(conversation, "user", "What is 17*3?")
    r1 = _run(conversation, q1, None, minutes=1)
    a1 = _say(conversation, "assistant", "Answer one", r1)
    q2 = _say(conversation, "user", "And **why**?")
    r2 = _run(conversation, q2, r1, minutes=2)
    a2 = _say(conversation, "assistant", "Old answer two", r2)
    r3 = _run(conversation, q2, r1, minutes=5)
    a3 = _say(conversation, "assistant", "New answer two: **because**.\n\n- one\n- two", r3)
    q2b = _say(conversation, "user", "And how, instead?")
    r4 = _run(conversation, q2b, r1, minutes=3)
    a4 = _say(conversation, "assistant", "Answer to the edit", r4)
    tool_events(r3, TOOL_ARGS, TOOL_RESULT)
    return Tree(
        conversation,
        {"r1": r1, "r2": r2, "r3": r3, "r4": r4},
        {"q1": q1, "a1": a1, "q2": q2, "a2": a2, "a3": a3, "q2b": q2b, "a4": a4},
    )


def tool_events(run: Run, args: dict, observation: str, tool: str = "calculator") -> None:
    """A tool call's two logged events, as a run writes them."""
    last = RunEvent.objects.filter(conversation=run.conversation).order_by("-seq").first()
    seq = last.seq if last else 0
    for status, extra in (
        ("start", {"tool_args": args}),
        ("done", {"observation": observation, "error": None, "iter_elapsed": 0.25}),
    ):
        seq += 1
        RunEvent.objects.create(
            run=run,
            conversation=run.conversation,
            seq=seq,
            channel="step",
            payload={
                "type": "iteration", "status": status, "iteration": 1, "tool_name": tool, **extra
            },
        )  # fmt: skip
