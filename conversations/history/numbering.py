"""Per-conversation numbering, on the conversation's row: messages count one by one;
event numbers are handed out in blocks, so that no number is ever given twice, even one
whose event was sent to readers but never written because its process died."""

from __future__ import annotations

from django.db import connection
from django.db.models import Max, OuterRef, Subquery
from django.db.models.expressions import Expression
from django.db.models.functions import Coalesce
from django.utils import timezone

from conversations.models import Conversation, RunEvent


def next_message_seq(conversation_id: int) -> int:
    """The conversation's next message number; also marks it updated.

    Call inside a transaction: the update locks the conversation's row until it ends, so
    two posts to one conversation are serialised (the second sees the first one's run).
    """
    now = Conversation._meta.get_field("updated_at").get_db_prep_value(timezone.now(), connection)
    return _update_returning(
        conversation_id,
        "last_message_seq = last_message_seq + 1, updated_at = %s",
        [now],
        returning="last_message_seq",
    )


# Event numbers a run takes at once: a run reserves again after this many events.
EVENT_BLOCK = 1000


def reserve_event_numbers(conversation_id: int, count: int = EVENT_BLOCK) -> tuple[int, int]:
    """Hand out the conversation's next ``count`` event numbers: (first, last)."""
    last = _update_returning(
        conversation_id,
        "event_seq_reserved = event_seq_reserved + %s",
        [count],
        returning="event_seq_reserved",
    )
    return last - count + 1, last


def _update_returning(
    conversation_id: int, assignments: str, params: list[object], *, returning: str
) -> int:
    """Update the conversation's row and return one of its new values."""
    table = connection.ops.quote_name(Conversation._meta.db_table)
    with connection.cursor() as cursor:
        # Plain SQL: the ORM cannot return the updated value (UPDATE ... RETURNING).
        cursor.execute(
            f"UPDATE {table} SET {assignments} WHERE id = %s RETURNING {returning}",
            [*params, conversation_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {conversation_id} does not exist")
    return row[0]


def release_event_numbers(
    conversation_id: int, *, used_through: int, reserved_through: int
) -> bool:
    """Give back the numbers after ``used_through`` a run reserved and did not use, unless
    someone reserved after it meanwhile (then they stay a gap); whether they were."""
    return bool(
        Conversation.objects.filter(pk=conversation_id, event_seq_reserved=reserved_through).update(
            event_seq_reserved=used_through
        )
    )


def last_event_seq(conversation_id: int) -> int:
    """The highest event number of the conversation (0 before its first event)."""
    found = RunEvent.objects.filter(conversation_id=conversation_id).aggregate(last=Max("seq"))
    return found["last"] or 0


def last_event_seq_of(conversation: str) -> Expression:
    """:func:`last_event_seq` as an annotation, for the conversation the outer query's
    field ``conversation`` refers to (``"pk"`` on conversations)."""
    newest = RunEvent.objects.filter(conversation=OuterRef(conversation)).order_by("-seq")
    return Coalesce(Subquery(newest.values("seq")[:1]), 0)
