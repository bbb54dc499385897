"""Documents whose background indexing was lost are queued again, so none stays
``queued`` or ``indexing`` forever.

Nothing but the row remembers that a document waits to be indexed: a server killed while
it indexed in embedded mode, a worker killed mid-task (its Celery message is gone: the
broker emulates no acknowledgements, see the settings) or a task the broker lost (a
Redis restart) would leave it so. The sweep every ASGI server runs
(:class:`conversations.runs.launcher.Sweeper`) calls :func:`documents_recover`:

- embedded mode: the one server indexes every document, so one queued or claimed before
  this process started has no owner, and is queued again at the sweep's first look;
- team mode: one ``queued`` for longer than ``AGENTSITE_KNOWLEDGE_STALE_SECONDS``, or
  ``indexing`` without its worker's :class:`Heartbeat` for that long.

Each is sent again (:func:`knowledge.indexing.schedule`); the :data:`MAX_ATTEMPTS`-th time
one is found so it is ``failed`` instead, saying why (a document that kills the process
indexing it must not do so forever).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from types import TracebackType

from django.conf import settings
from django.db import DatabaseError, connections
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from knowledge import indexing
from knowledge.models import Document

__all__ = ["MAX_ATTEMPTS", "Heartbeat", "documents_recover", "stale_period"]

logger = logging.getLogger(__name__)

# Found without an owner this many times: failed rather than queued again.
MAX_ATTEMPTS = 3

# Translated when a document fails with one (gettext_noop only marks them).
INTERRUPTED = gettext_noop(
    "Indexing was interrupted %(count)d times (the process indexing this document stopped "
    "each time). Re-index it to try again."
)
NEVER_STARTED = gettext_noop(
    "Indexing never started: no background worker took this document up in %(count)d tries. "
    "Re-index it to try again, or ask an administrator to check the workers."
)

Status = Document.Status


def stale_period() -> timedelta:
    return timedelta(seconds=settings.AGENTSITE_KNOWLEDGE_STALE_SECONDS)


def heartbeat_interval() -> float:
    """Five beats to a stale period: a few lost writes never make a live worker look dead."""
    return settings.AGENTSITE_KNOWLEDGE_STALE_SECONDS / 5


def documents_recover(*, before: datetime | None = None) -> int:
    """Queue again and send, or fail, the documents without a live owner: ``queued``
    since before ``before``, or ``indexing`` with no sign of life since (default: a stale
    period ago). The conditional updates let several servers sweep at once, and leave a
    document a worker claimed or beat for meanwhile alone. Returns how many changed."""
    cutoff = before or timezone.now() - stale_period()
    unfinished = Document.objects.filter(status__in=[Status.QUEUED, Status.INDEXING])  # its index
    stale = (
        unfinished.alias(last_sign=Coalesce("claimed_at", "queued_at"))
        .filter(
            Q(status=Status.QUEUED, queued_at__lt=cutoff)
            | Q(status=Status.INDEXING, last_sign__lt=cutoff)
        )
        .order_by()
    )
    changed = 0
    for document_id, status, attempts in stale.values_list("pk", "status", "attempts"):
        still = stale.filter(pk=document_id, status=status, attempts=attempts)
        attempts += 1
        if attempts >= MAX_ATTEMPTS:
            wording = INTERRUPTED if status == Status.INDEXING else NEVER_STARTED
            reason = _(wording) % {"count": attempts}
            if still.update(status=Status.FAILED, error=reason, attempts=attempts):
                logger.warning("document %s %s without an owner: failed", document_id, status)
                changed += 1
            continue
        requeued = still.update(
            status=Status.QUEUED,
            error="",
            queued_at=timezone.now(),
            claimed_at=None,
            attempts=attempts,
        )
        if requeued:
            logger.warning(
                "document %s %s without an owner: queued again (%d of %d)",
                document_id,
                status,
                attempts,
                MAX_ATTEMPTS - 1,
            )
            indexing.schedule(document_id)
            changed += 1
    return changed


class Heartbeat:
    """While a worker indexes a document, its ``claimed_at`` kept fresh from a thread of
    its own (the indexing thread is busy), so the sweep tells a long indexing from a dead
    worker's. Team mode only: an embedded server's documents are judged by its start."""

    def __init__(self, document_id: int) -> None:
        self.document_id = document_id
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, name=f"knowledge-heartbeat-{document_id}", daemon=True
        )

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stopped.set()
        self._thread.join(timeout=10)  # a beat waits at most for the database's timeout

    def _beat(self) -> None:
        try:
            while not self._stopped.wait(heartbeat_interval()):
                try:
                    Document.objects.filter(pk=self.document_id, status=Status.INDEXING).update(
                        claimed_at=timezone.now()
                    )
                except DatabaseError:  # the next beat tries again; the sweep waits 5 of them
                    logger.warning("document %s: heartbeat not written", self.document_id)
        finally:
            connections.close_all()  # this thread's own
