"""Celery task (team mode): index a knowledge document in a worker."""

from __future__ import annotations

from celery import shared_task

from knowledge import indexing, recovery


@shared_task(name=indexing.INDEX_DOCUMENT_TASK, ignore_result=True)
def index_document(document_id: int) -> str:
    """Plain sync work: the worker's thread does it (no run loop needed), its heartbeat
    telling the servers' sweep that this worker still owns the document."""
    with recovery.Heartbeat(document_id):
        return indexing.index_document(document_id)
