"""A run's claim (plain ``UPDATE ... RETURNING`` and one join), its close and the plain
row writes (:mod:`conversations.rows`), on a real PostgreSQL.

The test suite's own database is SQLite; this SQL is written for both, so it runs
here once more against a fresh PostgreSQL database in a process of its own.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.integration.stack import run_on_fresh_postgres

pytestmark = pytest.mark.integration

SCRIPT = textwrap.dedent(
    """
    import json

    from django.contrib.auth import get_user_model

    from conversations import rows, services
    from conversations.models import Conversation, Message, Run

    user = get_user_model().objects.create_user(username="claim", password="pw-claim-123")
    conversation = services.conversation_create(owner=user)
    trigger = Message.objects.create(
        conversation=conversation, seq=1, role="user", content="é <b>quoted</b>"
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_message_seq=1, last_event_seq=4)
    run = Run.objects.create(conversation=conversation, trigger_message=trigger)
    stopped = Run.objects.create(conversation=conversation, cancel_requested=True)

    claimed = services.run_claim(run_id=run.pk, task_id="task-9")
    again = services.run_claim(run_id=run.pk)
    refused = services.run_claim(run_id=stopped.pk)
    services.run_close(
        run_id=run.pk, status="succeeded", error="", iterations=3,
        usage={"total_tokens": 15, "note": "é"}, elapsed=0.5,
    )
    run.refresh_from_db()
    answer = services.message_create(
        conversation=conversation, seq=2, role="assistant", content="Done.", run=run,
        usage={"total_tokens": 15, "nested": [1, None]},
    )
    rows.update(Message, trigger.pk, run=run)
    stored = Message.objects.get(pk=answer.pk)
    from django.forms.models import model_to_dict
    read = rows.get(Conversation, conversation.pk, owner_id=user.pk)
    print(json.dumps({
        "read": [
            model_to_dict(read) == model_to_dict(Conversation.objects.get(pk=conversation.pk)),
            read.updated_at.tzinfo is not None,
            rows.get(Conversation, conversation.pk, owner_id=user.pk + 1) is None,
        ],
        "message": [
            stored.content, stored.usage, stored.run_id == run.pk, stored.kind,
            stored.created_at == answer.created_at, Message.objects.get(pk=trigger.pk).run_id
            == run.pk,
        ],
        "loaded": [
            claimed.conversation.owner.pk == user.pk, claimed.conversation.last_event_seq,
            claimed.conversation.last_message_seq, claimed.trigger_message.content,
            claimed.trigger_message.seq,
        ],
        "again": again is None, "refused": refused is None,
        "row": [run.status, run.task_id, run.started_at == run.heartbeat_at is not None],
        "closed": [run.iterations, run.usage, run.elapsed, run.finished_at > run.started_at],
    }))
    """
)


def test_a_run_is_claimed_once_closed_and_answered(tmp_path):
    result = run_on_fresh_postgres(tmp_path, SCRIPT)

    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["loaded"] == [True, 4, 1, "é <b>quoted</b>", 1]
    assert outcome["again"] and outcome["refused"]
    assert outcome["row"] == ["succeeded", "task-9", True]
    assert outcome["closed"] == [3, {"total_tokens": 15, "note": "é"}, 0.5, True]
    assert outcome["read"] == [True, True, True]
    assert outcome["message"] == [
        "Done.",
        {"total_tokens": 15, "nested": [1, None]},
        True,
        "chat",
        True,
        True,
    ]
