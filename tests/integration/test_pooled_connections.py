"""Threads of the app that end give their pooled PostgreSQL connection back.

A connection still checked out when its thread ends never returns to psycopg's pool: after
``DB_POOL_SIZE`` such endings every query of the process waits for the pool and fails.
The run poller's thread ends a while after a process's last run, so a worker that went
quiet that many times stopped working.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.integration.stack import run_on_fresh_postgres

pytestmark = pytest.mark.integration

QUIET_SPELLS = 4  # more than the pool below holds

SCRIPT = textwrap.dedent(
    """
    import asyncio

    from django.contrib.auth import get_user_model

    from conversations import services
    from conversations.models import Message, Run
    from conversations.watcher import poller
    from engine import CancelToken

    # Every query of this script runs in this thread (the migration too): one pooled
    # connection. The other is the poller thread's.
    user = get_user_model().objects.create_user(username="quiet", password="pw-quiet-123")
    conversation = services.conversation_create(owner=user)


    async def watch_until_delivered(run_id):
        delivered = asyncio.Event()
        await poller.watch(run_id, CancelToken(), lambda message_id, content: delivered.set())
        poller.wake(run_id)  # as the runner does when its claim saw a follow-up
        await asyncio.wait_for(delivered.wait(), timeout=20)
        poller.forget(run_id)
        while poller.is_running():  # the run ended; the poller thread ends too
            await asyncio.sleep(0.02)


    for number in range(QUIET_SPELLS):
        # A run with a follow-up waiting: the poller's tick delivers it, in its own thread
        # with its own connection.
        run = Run.objects.create(conversation=conversation, status="running")
        services.message_create(
            conversation=conversation, role="user", content=f"follow-up {number}",
            kind=Message.Kind.INJECT, run=run,
        )
        asyncio.run(watch_until_delivered(run.pk))
        print(f"spell {number} delivered", flush=True)
    print(f"runs {Run.objects.count()}", flush=True)
    """
).replace("QUIET_SPELLS", str(QUIET_SPELLS))


def test_a_process_keeps_its_database_after_more_quiet_spells_than_its_pool_holds(tmp_path):
    result = run_on_fresh_postgres(
        tmp_path,
        SCRIPT,
        {
            "DB_POOL_SIZE": "2",
            "AGENTSITE_RUN_POLL_SECONDS": "0.02",  # the poller thread ends within 0.6 s
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    delivered = [line for line in result.stdout.splitlines() if line.endswith("delivered")]
    assert len(delivered) == QUIET_SPELLS
    assert f"runs {QUIET_SPELLS}" in result.stdout
