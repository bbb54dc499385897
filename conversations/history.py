"""What the engine sees of a conversation's past when a run starts."""

from __future__ import annotations

from conversations.models import Message, Run
from engine import ChatMessage
from engine.context import ContextGuard, model_budget


def history_for_run(*, run: Run) -> list[ChatMessage]:
    """Earlier user/assistant messages (before the run's trigger), pins preserved."""
    trigger_seq = run.trigger_message.seq if run.trigger_message_id else None
    qs = Message.objects.filter(conversation_id=run.conversation_id).exclude(
        kind=Message.Kind.INJECT, delivered_at__isnull=True
    )
    if trigger_seq is not None:
        qs = qs.filter(seq__lt=trigger_seq)
    return [
        ChatMessage(role=m.role, content=m.content, pinned=m.pinned)
        for m in qs.order_by("seq").only("role", "content", "pinned")
        if m.role in (Message.Role.USER, Message.Role.ASSISTANT) and m.content
    ]


def context_guard_for(model, llm) -> ContextGuard:
    """A per-run guard with the model's budget; the run's own LLM writes summaries."""
    budget = model_budget(
        getattr(model, "context_window", None), getattr(model, "max_output_tokens", None)
    )
    return ContextGuard(budget_tokens=budget, compact_llm=llm)
