"""A document whose indexing lost its owner (a killed server or worker, a task the broker
lost) is queued and sent again, a few times at most, then failed saying why; one that a
live process holds is left alone (knowledge/recovery.py).

The documents "left behind" are rows as a dead process leaves them: queued or claimed,
their times in the past. What is sent again is read back from the test's in-memory broker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from celery import current_app
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from conversations.runs import lifecycle
from conversations.runs.launcher import Sweeper
from files import services as file_services
from knowledge import recovery, retrieval, services, tasks
from knowledge.models import Document, KnowledgeBase

Status = Document.Status
STALE = 60.0  # AGENTSITE_KNOWLEDGE_STALE_SECONDS in these tests
LONG_AGO = timedelta(seconds=STALE * 2)

pytestmark = pytest.mark.filterwarnings("ignore:task_always_eager has no effect")


def sent_again() -> list[int]:
    """The documents whose indexing task was sent since the last look (drained)."""
    ids: list[int] = []
    with current_app.connection_for_read() as connection:
        queue = connection.SimpleQueue("celery")
        try:
            while queue.qsize():
                message = queue.get(timeout=1)
                assert message.headers["task"] == "knowledge.index_document"
                ids.append(message.payload[0][0])
                message.ack()
        finally:
            queue.close()
    return ids


@pytest.fixture
def team_mode(settings) -> Iterator[None]:
    settings.AGENTSITE_EXECUTION = "celery"
    settings.AGENTSITE_KNOWLEDGE_STALE_SECONDS = STALE
    sent_again()  # nothing left from another test
    yield
    sent_again()


def left_behind(base: KnowledgeBase, text: str, status: str, *, ago: timedelta) -> Document:
    """A document as a process that stopped left it: queued, or claimed for indexing,
    ``ago`` before now (nothing scheduled it in this process)."""
    name = f"{text.split()[0].lower()}.txt"
    stored = file_services.store(base.owner, SimpleUploadedFile(name, text.encode()))
    document = Document.objects.create(base=base, file=stored, name=stored.name)
    when = timezone.now() - ago
    if status == Status.QUEUED:
        Document.objects.filter(pk=document.pk).update(status=status, queued_at=when)
    else:
        queued = when - timedelta(seconds=1)
        Document.objects.filter(pk=document.pk).update(
            status=status, queued_at=queued, claimed_at=when
        )
    document.refresh_from_db()
    return document


def found(user, base: KnowledgeBase, query: str) -> list[str]:
    return [hit.document_name for hit in retrieval.search(user, [base.pk], query, 5)]


@pytest.fixture
def base(user) -> KnowledgeBase:
    return services.base_create(user, "Handbook")


# ------------------------------------------------------------------------- team mode


@pytest.mark.django_db
@pytest.mark.usefixtures("team_mode")
def test_a_document_whose_worker_died_mid_indexing_is_sent_again_and_indexed(user, base):
    dead = left_behind(base, "Holidays are 25 days a year.", Status.INDEXING, ago=LONG_AGO)

    assert recovery.documents_recover() == 1
    dead.refresh_from_db()
    assert (dead.status, dead.attempts, dead.claimed_at, dead.error) == ("queued", 1, None, "")
    assert sent_again() == [dead.pk]

    assert tasks.index_document(dead.pk) == "ready"  # the next worker takes it
    assert found(user, base, "holidays") == [dead.name]


@pytest.mark.django_db
@pytest.mark.usefixtures("team_mode")
def test_a_lost_task_is_sent_again_and_live_work_is_left_alone(base):
    lost = left_behind(base, "Pensions start at 60.", Status.QUEUED, ago=LONG_AGO)
    waiting = left_behind(base, "Just queued.", Status.QUEUED, ago=timedelta(seconds=5))
    beating = left_behind(base, "Indexing now.", Status.INDEXING, ago=timedelta(seconds=5))
    # Queued long ago, but its worker claimed it a moment ago: its claim is what counts.
    claimed = left_behind(base, "Claimed late.", Status.INDEXING, ago=timedelta(seconds=5))
    Document.objects.filter(pk=claimed.pk).update(queued_at=timezone.now() - LONG_AGO * 3)
    ready = left_behind(base, "Done long ago.", Status.READY, ago=LONG_AGO)

    assert recovery.documents_recover() == 1
    assert sent_again() == [lost.pk]
    statuses = dict(Document.objects.values_list("pk", "status"))
    assert statuses == {
        lost.pk: "queued",
        waiting.pk: "queued",
        beating.pk: "indexing",
        claimed.pk: "indexing",
        ready.pk: "ready",
    }
    assert recovery.documents_recover() == 0  # queued again just now: not stale
    assert sent_again() == []


@pytest.mark.django_db
@pytest.mark.usefixtures("team_mode")
def test_interrupted_again_and_again_it_fails_saying_so_until_added_again(base):
    doomed = left_behind(base, "Kills every worker.", Status.INDEXING, ago=LONG_AGO)
    never = left_behind(base, "No worker at all.", Status.QUEUED, ago=LONG_AGO)
    for attempt in range(1, recovery.MAX_ATTEMPTS):
        assert recovery.documents_recover() == 2
        assert sorted(sent_again()) == sorted([doomed.pk, never.pk])
        long_ago = timezone.now() - LONG_AGO  # each sent task lost the same way again
        Document.objects.filter(pk=doomed.pk).update(status=Status.INDEXING, claimed_at=long_ago)
        Document.objects.filter(pk=never.pk).update(queued_at=long_ago)
        assert Document.objects.get(pk=doomed.pk).attempts == attempt

    assert recovery.documents_recover() == 2
    assert sent_again() == []
    doomed.refresh_from_db()
    never.refresh_from_db()
    assert doomed.status == never.status == "failed"
    assert doomed.error.startswith("Indexing was interrupted 3 times")
    assert never.error.startswith("Indexing never started")
    assert recovery.documents_recover() == 0  # failed stays failed

    services.document_reindex(doomed)  # the owner's try again starts the count afresh
    doomed.refresh_from_db()
    assert (doomed.status, doomed.attempts, doomed.error) == ("queued", 0, "")
    assert recovery.documents_recover() == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("team_mode")
def test_a_workers_heartbeat_keeps_a_long_indexing_its_own(settings, base):
    """A worker indexing for longer than the stale period is not taken for dead; once it
    stops beating (killed), it is."""
    settings.AGENTSITE_KNOWLEDGE_STALE_SECONDS = stale = 1.0  # a beat every 0.2 s
    slow = left_behind(base, "Long to index.", Status.INDEXING, ago=timedelta(0))
    with recovery.Heartbeat(slow.pk):
        until = time.monotonic() + stale * 2.5
        while time.monotonic() < until:  # the sweep looks again and again meanwhile
            assert recovery.documents_recover() == 0
            time.sleep(0.05)
    assert Document.objects.get(pk=slow.pk).status == "indexing"
    assert sent_again() == []

    deadline = time.monotonic() + 10
    while not recovery.documents_recover():
        assert time.monotonic() < deadline, "never recovered after its heartbeat stopped"
        time.sleep(0.05)
    assert sent_again() == [slow.pk]


# --------------------------------------------------------------------- embedded mode


@pytest.mark.django_db(transaction=True)
async def test_an_embedded_server_starting_indexes_what_the_dead_one_left(settings, user, runtime):
    """The server's sweep, at its first look, queues again and indexes on its own loop the
    documents queued or being indexed before it started; one queued since it started is
    its own (its indexing was scheduled) and is left alone."""
    settings.AGENTSITE_EXECUTION = "embedded"
    settings.AGENTSITE_RUN_SWEEP_SECONDS = 0.1
    before_start = timezone.now() - lifecycle.PROCESS_STARTED + timedelta(seconds=1)

    def leave() -> tuple[KnowledgeBase, list[int], int]:
        base = services.base_create(user, "Handbook")
        dead = [
            left_behind(base, "Holidays are 25 days.", Status.QUEUED, ago=before_start).pk,
            left_behind(base, "Pensions start at 60.", Status.INDEXING, ago=before_start).pk,
        ]
        ours = left_behind(base, "Ours to index.", Status.QUEUED, ago=timedelta(0)).pk
        return base, dead, ours

    base, dead, ours = await sync_to_async(leave)()
    runtime.add(Sweeper()).start(asyncio.get_running_loop())  # as a server's runtime has

    async def statuses() -> dict[int, tuple[str, int]]:
        rows = Document.objects.values_list("pk", "status", "attempts")
        return {pk: (status, attempts) async for pk, status, attempts in rows}

    deadline = time.monotonic() + 20
    while {(now := await statuses())[pk][0] for pk in dead} != {"ready"}:
        assert time.monotonic() < deadline, f"not indexed: {now}"
        await asyncio.sleep(0.05)

    assert [now[pk] for pk in dead] == [("ready", 1), ("ready", 1)]
    assert now[ours] == ("queued", 0)
    hits = await sync_to_async(found)(user, base, "holidays pensions")
    assert sorted(hits) == ["holidays.txt", "pensions.txt"]
