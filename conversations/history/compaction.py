"""Compaction on load: keep a long conversation's history inside the model's budget.

At the start of a run the stored summary (if any) replaces the messages it covers, pinned
messages always stay verbatim, and when the result still exceeds the budget the older
messages are summarised once more, extending the stored summary rather than starting
over. The new summary is stored as a :class:`CompactionSummary` row and announced with
the ``compact`` event.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from conversations.history.attachments import load_files, message_files, with_files
from conversations.history.tree import RunTree, path_filter
from conversations.models import CompactionSummary, Message, Run
from engine import ChatMessage, ContextGuard, estimate_messages_tokens, model_budget

logger = logging.getLogger(__name__)

SUMMARY_PREFIX = "[Conversation summary]:"
LOAD_HINT = "general"
# History may use this share of the budget; the rest is room for the agent's system prompt,
# tool catalog and the tool loop (which the in-loop guard keeps in bounds).
LOAD_BUDGET_SHARE = 0.75


@dataclass
class StoredHistory:
    """A run's history as loaded from rows: messages with their sequence numbers."""

    seqs: list[int]
    messages: list[ChatMessage]
    summary: CompactionSummary | None


@dataclass
class LoadResult:
    messages: list[ChatMessage]
    summary_text: str | None = None
    covers_up_to_seq: int | None = None
    original_messages: int = 0
    kept_messages: int = 0

    @property
    def compacted(self) -> bool:
        return self.summary_text is not None


def history_load(*, run: Run) -> StoredHistory:
    """The user/assistant messages of the run's branch before its question, plus the
    latest summary made on that branch.

    A conversation's first message has nothing before it, and a summary only ever covers
    earlier messages: those runs (every new chat's first) start without these queries.
    """
    trigger_seq = run.trigger_message.seq if run.trigger_message_id else None
    if trigger_seq is not None and trigger_seq <= 1:
        return StoredHistory([], [], None)
    tree = RunTree.load(run.conversation_id)
    qs = Message.objects.filter(conversation_id=run.conversation_id).exclude(
        kind=Message.Kind.INJECT, delivered_at__isnull=True
    )
    if trigger_seq is not None:
        qs = qs.filter(seq__lt=trigger_seq)
    rows = path_filter(
        tree, tree.path_to(run.pk), qs.only("seq", "role", "content", "pinned", "run_id")
    )
    load_files(rows)
    seqs, messages = [], []
    for m in rows:
        if m.role in (Message.Role.USER, Message.Role.ASSISTANT) and m.content:
            # Earlier images are named only: the question's own go as image parts.
            content = with_files(m.content, message_files(m)).text
            seqs.append(m.seq)
            messages.append(ChatMessage(role=m.role, content=content, pinned=m.pinned))
    if not messages:
        return StoredHistory(seqs, messages, None)
    # The latest summary made on this branch: by a run before this one on it, or by an
    # earlier answer to the same question (the same history). Explicit order: the
    # model's default joins the conversation.
    summary = (
        CompactionSummary.objects.filter(
            conversation_id=run.conversation_id, run_id__in=_same_history_runs(tree, run.pk)
        )
        .order_by("-covers_up_to_seq", "-id")
        .first()
    )
    return StoredHistory(seqs, messages, summary)


def _same_history_runs(tree: RunTree, run_id: int) -> list[int]:
    """Runs whose history is a part of ``run_id``'s: its predecessors on its branch and
    the answers to its question at its fork."""
    path = tree.path_to(run_id)
    if not path:
        return []
    node = path[-1]
    siblings = [
        n.run_id for n in tree.children.get(node.parent_id, ()) if n.trigger_id == node.trigger_id
    ]
    return [n.run_id for n in path[:-1]] + siblings


def _apply_summary(history: StoredHistory) -> tuple[list[int], list[ChatMessage]]:
    """Replace what the stored summary covers (pinned messages excepted)."""
    if history.summary is None:
        return list(history.seqs), list(history.messages)
    covers = history.summary.covers_up_to_seq
    seqs, messages = [], []
    for seq, message in zip(history.seqs, history.messages, strict=True):
        if seq > covers or message.pinned:
            seqs.append(seq)
            messages.append(message)
    return seqs, messages


async def compact_on_load(history: StoredHistory, *, query: str, guard: ContextGuard) -> LoadResult:
    """The history to hand the agent, summarising older messages when over budget."""
    seqs, messages = _apply_summary(history)
    previous = history.summary.summary if history.summary else None
    with_summary = ([ChatMessage("system", f"{SUMMARY_PREFIX} {previous}")] if previous else []) + (
        messages
    )
    query_message = ChatMessage("user", query, pinned=True)
    target = int(guard.budget_tokens * LOAD_BUDGET_SHARE)
    if estimate_messages_tokens([*with_summary, query_message]) <= target:
        return LoadResult(with_summary)
    budget = target - estimate_messages_tokens([query_message])
    result = await guard.compact(
        messages, hint=LOAD_HINT, budget_tokens=max(budget, 1), previous_summary=previous
    )
    original = len(history.messages)
    if not result.summary or result.covered_until is None:
        logger.info("compaction on load fell back to %s", result.method)
        return LoadResult(result.messages)
    return LoadResult(
        messages=result.messages,
        summary_text=result.summary,
        covers_up_to_seq=seqs[result.covered_until],
        original_messages=original,
        kept_messages=len(result.messages),
    )


def summary_store(*, run_id: int, result: LoadResult, model_used: str) -> CompactionSummary:
    run = Run.objects.get(pk=run_id)
    return CompactionSummary.objects.create(
        conversation_id=run.conversation_id,
        run=run,
        summary=result.summary_text or "",
        covers_up_to_seq=result.covers_up_to_seq or 0,
        original_count=result.original_messages,
        kept_count=result.kept_messages,
        model_used=model_used,
    )


def context_guard_for(model, llm) -> ContextGuard:
    """A per-run guard with the model's budget; the run's own LLM writes summaries."""
    budget = model_budget(
        getattr(model, "context_window", None), getattr(model, "max_output_tokens", None)
    )
    return ContextGuard(budget_tokens=budget, compact_llm=llm)
