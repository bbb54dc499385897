"""What PostgreSQL runs differently from the suite's SQLite database: the message counter
(``UPDATE ... RETURNING``), the event log's batch write and its retry, a run's claim and
close, in a process of its own against a fresh PostgreSQL database."""

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
    from django.db import transaction

    from conversations import services
    from conversations.models import Message, Run, RunEvent
    from conversations.history.numbering import last_event_seq, next_message_seq
    from conversations.runs import lifecycle
    from conversations.runs.publisher import write_events

    user = get_user_model().objects.create_user(username="pg", password="pw-pg-123")
    conversations = [services.conversation_create(owner=user) for _ in range(2)]
    with transaction.atomic():
        numbers = [next_message_seq(conversations[0].pk) for _ in range(3)]
    trigger = Message.objects.create(
        conversation=conversations[0], seq=4, role="user", content="é <b>quoted</b>"
    )
    runs = [
        Run.objects.create(conversation=conversations[0], trigger_message=trigger),
        Run.objects.create(conversation=conversations[1]),
    ]
    tricky = {"status": "delta", "content": 'é "quoted" \\\\ back\\tslash <b>\\n'}
    batches = [
        (c.pk, [(1, r.pk, "answer", tricky), (2, r.pk, "step", {"a": [1, None, True]})])
        for c, r in zip(conversations, runs)
    ]
    write_events(batches)
    write_events(batches)  # a retry of a write that had committed

    claimed = lifecycle.run_claim(run_id=runs[0].pk, task_id="task-9")
    again = lifecycle.run_claim(run_id=runs[0].pk)
    Run.objects.filter(pk=runs[1].pk).update(cancel_requested=True)
    refused = lifecycle.run_claim(run_id=runs[1].pk)
    lifecycle.run_close_unanswered(
        run=claimed, model=None, taken_in=[], status="failed", error="The model is down.",
        iterations=3, usage={"total_tokens": 15, "note": "é"}, elapsed=0.5,
    )
    run = Run.objects.get(pk=runs[0].pk)
    rows = RunEvent.objects.order_by("conversation_id", "seq")
    print(json.dumps({
        "numbers": numbers,
        "rows": [[r.conversation_id, r.run_id, r.seq, r.channel, r.payload] for r in rows],
        "last": [last_event_seq(c.pk) for c in conversations],
        "ids": [c.pk for c in conversations], "runs": [r.pk for r in runs],
        "tricky": tricky,
        "claimed": [claimed.conversation.owner.pk == user.pk, claimed.trigger_message.content],
        "again": again is None, "refused": refused is None,
        "run": [run.status, run.task_id, run.error, run.iterations, run.usage, run.elapsed],
    }))
    """
)


def test_counters_event_log_and_run_states_on_postgresql(tmp_path):
    result = run_on_fresh_postgres(tmp_path, SCRIPT)

    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["numbers"] == [1, 2, 3]
    expected = []
    for conversation_id, run_id in zip(out["ids"], out["runs"], strict=True):
        expected.append([conversation_id, run_id, 1, "answer", out["tricky"]])
        expected.append([conversation_id, run_id, 2, "step", {"a": [1, None, True]}])
    assert out["rows"] == expected  # each once, the retry changed nothing
    assert out["last"] == [2, 2]
    assert out["claimed"] == [True, "é <b>quoted</b>"]
    assert out["again"] and out["refused"]
    assert out["run"] == [
        "failed", "task-9", "The model is down.", 3, {"total_tokens": 15, "note": "é"}, 0.5,
    ]  # fmt: skip


RESTART_SCRIPT = textwrap.dedent(
    """
    import json
    import os
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import psycopg
    from django.db import OperationalError, connection, connections

    from conversations.runs.db import on_database_thread

    THREADS = 4
    pool = ThreadPoolExecutor(THREADS)
    together = threading.Barrier(THREADS)

    def backend() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return cursor.fetchone()[0]

    def on_every_thread() -> list:
        # Each of the threads calls once, all at the same time: one call per thread.
        def call(_):
            try:
                return on_database_thread(backend)
            except OperationalError as exc:
                return f"failed: {type(exc).__name__}"
            finally:
                together.wait()
        return list(pool.map(call, range(THREADS)))

    before = on_every_thread()  # four threads, each keeping its connection
    # What a server restart does to them (and to the pool's idle ones).
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    first = pool.submit(lambda: on_database_thread(backend)).exception()
    after = on_every_thread()  # the others were used a moment ago: no idle time passed
    print(json.dumps({
        "before": before, "first": type(first).__name__, "after": after,
    }))
    """
)


def test_after_a_restart_one_call_fails_and_every_thread_takes_a_checked_connection(tmp_path):
    """A restart kills every kept connection. The first call to meet one fails; from then
    on every database thread hands its connection back before its next call, and takes
    one the pool checked, however recently it was used."""
    result = run_on_fresh_postgres(tmp_path, RESTART_SCRIPT)

    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(set(out["before"])) == 4 and all(isinstance(p, int) for p in out["before"])
    assert out["first"] == "OperationalError"
    assert all(isinstance(pid, int) for pid in out["after"]), out["after"]
    assert not set(out["after"]) & set(out["before"])  # new connections, not the dead ones


IMPORT_SCRIPT = textwrap.dedent(
    """
    import json

    from django.contrib.auth import get_user_model

    from conversations.transfer.importing import conversation_import

    user = get_user_model().objects.create_user(username="pg-import", password="pw-pg-123")
    messages = [
        {"id": 10, "seq": 1, "role": "user", "content": "q1", "run_id": 7},
        {"id": 11, "seq": 2, "role": "assistant", "content": "a1", "run_id": 7},
        {"id": 12, "seq": 3, "role": "user", "content": "q2", "run_id": 8},
    ]
    runs = [
        {"id": 7, "trigger_message_id": 10, "status": "succeeded", "selected": True},
        {"id": 8, "parent_id": 7, "trigger_message_id": 12, "status": "running"},
    ]
    raw = json.dumps({"format": "agentsite.conversation", "version": 1,
                      "messages": messages, "runs": runs}).encode()
    conversation = conversation_import(owner=user, raw=raw)
    rows = list(conversation.runs.order_by("pk").values_list(
        "parent_id", "trigger_message__content", "status"))
    first = conversation.runs.order_by("pk").first().pk
    print(json.dumps({"rows": rows, "first": first}))
    """
)


def test_an_import_links_its_runs_on_postgresql(tmp_path):
    """The import links runs to their parents and questions in one executemany."""
    result = run_on_fresh_postgres(tmp_path, IMPORT_SCRIPT)

    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["rows"] == [[None, "q1", "succeeded"], [out["first"], "q2", "failed"]]
