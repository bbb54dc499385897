"""A document's status: queued when added, ready once indexed (its chunks searchable),
failed with a reason a person can act on; scheduled as the run launcher launches runs."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from kombu.exceptions import OperationalError

from core import runtime
from knowledge import indexing, retrieval, services
from knowledge.fulltext import FTS_TABLE
from knowledge.models import Chunk, Document
from tests.files import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def base(user):
    return services.base_create(user, "Handbook")


def fts_rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {FTS_TABLE}")
        return cursor.fetchone()[0]


def test_added_queued_then_ready_with_chunks_on_their_pages(
    base, django_capture_on_commit_callbacks, monkeypatch
) -> None:
    scheduled: list[int] = []
    monkeypatch.setattr(indexing, "schedule", scheduled.append)
    pdf = builders.pdf_with_text(["Holidays are 25 days.", "Pensions start at 60."])
    with django_capture_on_commit_callbacks(execute=True):
        document = services.document_add(base, SimpleUploadedFile("h.pdf", pdf))
    assert (document.status, scheduled) == ("queued", [document.pk])  # once committed

    assert indexing.index_document(document.pk) == "ready"
    document.refresh_from_db()
    assert (document.status, document.error, document.chunk_count) == ("ready", "", 2)
    assert document.indexed_at is not None
    assert [(c.page, c.text) for c in document.chunks.all()] == [
        (1, "Holidays are 25 days."),
        (2, "Pensions start at 60."),
    ]
    assert fts_rows() == 2
    assert indexing.index_document(document.pk) == "skipped"  # not queued any more


def test_no_text_fails_with_the_reason(base) -> None:
    pdf = builders.pdf_with_text([""])  # a scan: pages without text
    document = services.document_add(base, SimpleUploadedFile("scan.pdf", pdf))
    assert indexing.index_document(document.pk) == "failed"
    document.refresh_from_db()
    assert document.status == "failed"
    assert "No text could be read" in document.error
    assert document.chunks.count() == 0


def test_an_unexpected_error_fails_without_a_traceback_for_the_user(base, monkeypatch) -> None:
    document = services.document_add(base, SimpleUploadedFile("a.txt", b"text"))
    monkeypatch.setattr(indexing.chunking, "split", lambda *a, **k: 1 / 0)
    assert indexing.index_document(document.pk) == "failed"
    document.refresh_from_db()
    assert document.error == indexing.UNEXPECTED


def test_reindexing_replaces_the_chunks(base, settings) -> None:
    document = services.document_add(base, SimpleUploadedFile("a.txt", b"alpha beta " * 300))
    indexing.index_document(document.pk)
    before = Chunk.objects.filter(document=document).count()
    settings.AGENTSITE_KNOWLEDGE_CHUNK_CHARS = 200
    services.document_reindex(document)
    assert indexing.index_document(document.pk) == "ready"
    assert Chunk.objects.filter(document=document).count() > before
    assert fts_rows() == Chunk.objects.count()  # the triggers removed the old ones


def test_deleting_removes_chunks_from_the_index(base) -> None:
    document = services.document_add(base, SimpleUploadedFile("a.txt", b"gamma delta"))
    indexing.index_document(document.pk)
    services.document_delete(document)
    assert (Chunk.objects.count(), fts_rows()) == (0, 0)


def test_a_process_without_runtime_fails_the_document(base, monkeypatch, settings) -> None:
    settings.AGENTSITE_EXECUTION = "embedded"
    document = services.document_add(base, SimpleUploadedFile("a.txt", b"x y z"))
    monkeypatch.setattr(runtime, "primary_or_none", lambda: None)
    assert indexing.schedule(document.pk) is False
    document.refresh_from_db()
    assert (document.status, document.error) == ("failed", indexing.NO_RUNTIME)


def test_team_mode_queues_the_task_by_name_or_fails_saying_so(base, monkeypatch, settings):
    settings.AGENTSITE_EXECUTION = "celery"
    document = services.document_add(base, SimpleUploadedFile("a.txt", b"x y z"))
    sent: list[tuple[str, tuple]] = []
    monkeypatch.setattr(
        indexing.current_app, "send_task", lambda name, args: sent.append((name, args))
    )
    assert indexing.schedule(document.pk) is True
    assert sent == [("knowledge.index_document", (document.pk,))]

    def down(name: str, args: tuple) -> None:
        raise OperationalError("connection refused")

    monkeypatch.setattr(indexing.current_app, "send_task", down)
    assert indexing.schedule(document.pk) is False
    document.refresh_from_db()
    assert (document.status, document.error) == ("failed", indexing.QUEUE_UNREACHABLE)


def test_the_celery_task_is_registered_under_that_name() -> None:
    from agentsite.celery import app
    from knowledge import tasks

    assert tasks.index_document.name == indexing.INDEX_DOCUMENT_TASK
    assert indexing.INDEX_DOCUMENT_TASK in app.tasks  # autodiscovered


@pytest.mark.django_db(transaction=True)
def test_embedded_mode_indexes_on_the_runtime_loop_in_a_thread(user, settings) -> None:
    """The whole path: committed, handed to the run loop, indexed in a worker thread."""
    settings.AGENTSITE_EXECUTION = "embedded"
    base = services.base_create(user, "Live")
    submitted = []
    loop = runtime.primary()
    original = loop.submit
    loop.submit = lambda coroutine: submitted.append(original(coroutine)) or submitted[-1]
    try:
        document = services.document_add(base, SimpleUploadedFile("n.md", b"# Notes\n\nzebra"))
        assert submitted[0].result(timeout=30) == "ready"
    finally:
        loop.submit = original
    document.refresh_from_db()
    assert document.status == Document.Status.READY
    assert [hit.heading for hit in retrieval.search(user, None, "zebra")] == ["Notes"]
