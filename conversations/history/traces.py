"""What a paused run keeps so that it can go on: the engine's trace, and where a run
resuming it starts from.

A ReAct run that a loop guard paused stores its trace (the engine's messages from its
question on, :attr:`engine.AgentResult.trace`) on its row. A run that resumes it is its
child (``Run.parent``) with ``resumes_parent`` set: it reads the conversation before the
question the way the paused run did, then the trace, then its own question (the user's
note). A resumed run that pauses again stores the whole trace, the earlier one included,
so the first run of the chain is the one whose history they all share.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from conversations.models import Run
from engine import ChatMessage
from engine.prompts import OBSERVATION_PREFIX

logger = logging.getLogger(__name__)

# How far up a chain of resumed runs the first one is looked for (a chain is as long as
# the user pressed Continue on a run that paused again).
MAX_CHAIN = 1_000


@dataclass
class ResumePoint:
    """Where a resuming run starts: the trace it goes on from, and the run whose history
    (the conversation before the question) it reads."""

    paused_run_id: int
    history_run: Run
    trace: list[ChatMessage]


def tool_results(trace: list[ChatMessage]) -> int:
    """How many tool results ``trace`` holds (native ones, or JSON mode's observations)."""
    return sum(
        1
        for m in trace
        if m.role == "tool" or (m.role == "user" and m.text().startswith(OBSERVATION_PREFIX))
    )


def mark_resuming(run: Run) -> None:
    """Make ``run`` go on from its parent's trace (inside the transaction that created
    it: it launches on commit)."""
    Run.objects.filter(pk=run.pk).update(resumes_parent=True)
    run.resumes_parent = True


def trace_text(trace: list[ChatMessage]) -> str:
    """A trace as stored (JSON text, so the model gets its calls back byte for byte)."""
    return json.dumps([message.to_dict() for message in trace], ensure_ascii=False)


def trace_store(*, run_id: int, trace: list[ChatMessage]) -> bool:
    """Keep a paused run's trace; False (nothing kept) when there is none."""
    if not trace:
        return False
    return bool(Run.objects.filter(pk=run_id).update(resume_trace=trace_text(trace)))


def trace_load(text: str | None) -> list[ChatMessage]:
    """A stored trace as engine messages; [] when it is missing or unreadable."""
    if not text:
        return []
    try:
        data = json.loads(text)
        if not isinstance(data, list):
            raise ValueError("a trace is a list of messages")
        return [ChatMessage.from_dict(item) for item in data]
    except ValueError:
        logger.warning("a stored run trace is unreadable", exc_info=True)
        return []


def resume_point(run: Run) -> ResumePoint | None:
    """Where ``run`` starts if it resumes a paused run (None: it does not; no query then:
    the claim loaded ``resumes_parent`` and ``parent_id``)."""
    if not run.resumes_parent or run.parent_id is None:
        return None
    paused_id = run.parent_id
    paused = Run.objects.filter(pk=paused_id).values("resume_trace").first() or {}
    first_id = _chain_start(paused_id)
    runs = Run.objects.select_related("trigger_message").defer("resume_trace")
    history_run = runs.get(pk=first_id)
    return ResumePoint(paused_id, history_run, trace_load(paused.get("resume_trace")))


def handed_over_point(run: Run) -> ResumePoint | None:
    """Where a run handed back by a stopped worker goes on (None: it was not; no query
    then: the claim read whether it has a trace of its own, ``handed_over``).

    Only such a run is active with a trace of its own (a paused run keeps its trace once
    it ended, and a run continuing it reads its parent's). Its history is the one its
    first execution read: before its question, or before the question of the chain of
    paused runs it continues (its trace holds theirs, as a trace that paused again does).
    """
    if not getattr(run, "handed_over", False):
        return None
    own = Run.objects.filter(pk=run.pk).values_list("resume_trace", flat=True).first()
    history_run = run
    if run.resumes_parent and run.parent_id is not None:
        runs = Run.objects.select_related("trigger_message").defer("resume_trace")
        history_run = runs.get(pk=_chain_start(run.parent_id))
    return ResumePoint(run.pk, history_run, trace_load(own))


def _chain_start(run_id: int) -> int:
    """The first run of a chain of resumed runs ending at ``run_id``."""
    for _ in range(MAX_CHAIN):
        row = Run.objects.filter(pk=run_id).values("parent_id", "resumes_parent").first()
        if row is None or not row["resumes_parent"] or row["parent_id"] is None:
            return run_id
        run_id = row["parent_id"]
    return run_id
