"""The event log's PostgreSQL writer (COPY + one UPDATE), on a real PostgreSQL.

The test suite's own database is SQLite, which takes the other writer; this runs the
publisher's batch write in a process of its own against a fresh PostgreSQL database.
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

    from conversations import services
    from conversations.models import Conversation, Run, RunEvent
    from conversations.publisher import _write_event_batches

    user = get_user_model().objects.create_user(username="log", password="pw-log-123")
    conversations = [services.conversation_create(owner=user) for _ in range(3)]
    runs = [Run.objects.create(conversation=c, status="running") for c in conversations]
    Conversation.objects.filter(pk=conversations[2].pk).update(last_event_seq=100)
    tricky = {"status": "delta", "content": 'é "quoted" \\\\ back\\tslash <b>\\n'}

    _write_event_batches([
        (c.pk, [(1, r.pk, "answer", tricky), (2, r.pk, "step", {"a": [1, None, True]})])
        for c, r in zip(conversations, runs)
    ])

    rows = RunEvent.objects.order_by("conversation_id", "seq")
    print(json.dumps({
        "rows": [[r.conversation_id, r.run_id, r.seq, r.channel, r.payload] for r in rows],
        "marks": [c.last_event_seq for c in Conversation.objects.order_by("pk")],
        "ids": [c.pk for c in conversations], "runs": [r.pk for r in runs],
        "tricky": tricky,
    }))
    """
)


def test_a_batch_lands_row_for_row_and_raises_each_conversations_mark(tmp_path):
    result = run_on_fresh_postgres(tmp_path, SCRIPT)

    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    written = json.loads(result.stdout.strip().splitlines()[-1])
    ids, runs, tricky = written["ids"], written["runs"], written["tricky"]
    expected = []
    for conversation_id, run_id in zip(ids, runs, strict=True):
        expected.append([conversation_id, run_id, 1, "answer", tricky])
        expected.append([conversation_id, run_id, 2, "step", {"a": [1, None, True]}])
    assert written["rows"] == expected
    assert written["marks"] == [2, 2, 100]  # raised, never lowered
