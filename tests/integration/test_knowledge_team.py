"""Knowledge documents over real processes: uploaded through the API, indexed in the
background (a Celery worker in team mode, the server's loop in embedded mode) and found
by search; and never left stuck when the process indexing one is killed (kill -9) mid-way
(knowledge/recovery.py).

"Mid-way" is a state the test sees, not a guess at timing: the document is large enough
that indexing it takes seconds, the test waits until the database says ``indexing``, then
kills, and checks the database still said so.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.integration.stack import Browser, Stack, async_wait_for, running_stack

pytestmark = pytest.mark.integration

STALE_SECONDS = 3  # AGENTSITE_KNOWLEDGE_STALE_SECONDS of these stacks (the default is 300)
FAST_RECOVERY = {
    "AGENTSITE_KNOWLEDGE_STALE_SECONDS": str(STALE_SECONDS),
    "AGENTSITE_RUN_SWEEP_SECONDS": "0.5",
}
MARKER = "zeppelin"  # a word only one passage of the documents holds
# Characters of a large document: about as much text as a file keeps (files/extraction.py's
# MAX_TEXT_CHARS, 2,000,000), some 1,700 passages, which take seconds to index.
LARGE = 1_950_000


def handbook(chars: int = LARGE) -> bytes:
    """A plain-text document of about ``chars`` characters, the marker in its first line."""
    first = f"The {MARKER} hangar is behind building four.\n\n"
    line = "Section {n}. Travel claims go to the finance office within thirty days.\n"
    count = (chars - len(first)) // len(line.format(n=10_000))
    return (first + "".join(line.format(n=n) for n in range(count))).encode()


class KnowledgeApi:
    """The /api/knowledge endpoints, as a signed-in browser session calls them."""

    def __init__(self, browser: Browser, stack: Stack) -> None:
        self.browser, self.stack = browser, stack

    @property
    def headers(self) -> dict[str, str]:
        return {"X-CSRFToken": self.browser.http.cookies["csrftoken"]}

    async def create_base(self, name: str) -> int:
        response = await self.browser.http.post(
            "/api/knowledge", json={"name": name}, headers=self.headers
        )
        assert response.status_code == 201, (response.status_code, response.text[:300])
        return int(response.json()["id"])

    async def upload(self, base_id: int, name: str, data: bytes) -> int:
        response = await self.browser.http.post(
            f"/api/knowledge/{base_id}/documents",
            files={"file": (name, data, "text/plain")},
            headers=self.headers,
            timeout=120,
        )
        assert response.status_code == 201, (response.status_code, response.text[:300])
        assert response.json()["status"] == "queued"
        return int(response.json()["id"])

    async def document(self, base_id: int, document_id: int) -> dict[str, Any]:
        response = await self.browser.http.get(f"/api/knowledge/{base_id}/documents")
        assert response.status_code == 200, (response.status_code, response.text[:300])
        return next(d for d in response.json() if d["id"] == document_id)

    async def ready(self, base_id: int, document_id: int, *, timeout: float) -> dict[str, Any]:
        """The document once ``ready``, polled as its owner's page would."""
        seen: list[dict[str, Any]] = []

        async def is_ready() -> dict[str, Any] | None:
            seen[:] = [await self.document(base_id, document_id)]
            assert seen[0]["status"] != "failed", seen[0]["error"]
            return seen[0] if seen[0]["status"] == "ready" else None

        return await async_wait_for(
            is_ready,
            timeout=timeout,
            what=f"document {document_id} to be ready",
            interval=0.2,
            detail=lambda: f"last seen: {seen}\n{self.stack.logs()}",
        )

    async def search(self, base_id: int, query: str) -> list[dict[str, Any]]:
        response = await self.browser.http.get(
            f"/api/knowledge/{base_id}/search", params={"q": query}
        )
        assert response.status_code == 200, (response.status_code, response.text[:300])
        return response.json()["results"]


@contextlib.asynccontextmanager
async def signed_in(stack: Stack) -> AsyncIterator[KnowledgeApi]:
    async with Browser(stack.base_url) as browser:
        await browser.login()
        yield KnowledgeApi(browser, stack)


def status_of(stack: Stack, document_id: int) -> tuple[str, int]:
    """The document's status and attempts, read from the database itself."""
    ((status, attempts),) = stack.query(
        "SELECT status, attempts FROM knowledge_document WHERE id = %s", document_id
    )
    return status, attempts


async def indexing_now(stack: Stack, document_id: int) -> None:
    await async_wait_for(
        lambda: status_of(stack, document_id)[0] == "indexing",
        timeout=60,
        what=f"document {document_id} to be claimed for indexing",
        interval=0.02,
        detail=stack.logs,
    )


# ------------------------------------------------------------------------- team mode


@pytest.fixture(scope="module")
def team() -> Iterator[Stack]:
    """PostgreSQL, Redis, one Celery worker (which a test kills), daphne."""
    with running_stack(mode="team", workers=1, extra_env=FAST_RECOVERY) as stack:
        yield stack


@pytest.fixture
async def team_api(team: Stack) -> AsyncIterator[KnowledgeApi]:
    async with signed_in(team) as api:
        yield api


async def test_an_uploaded_document_is_indexed_by_a_worker_and_found(
    team_api: KnowledgeApi,
) -> None:
    api = team_api
    base_id = await api.create_base("Travel handbook")
    text = b"# Claims\n\nTravel claims go to the finance office.\n\n# Parking\n\nThe zeppelin "
    document_id = await api.upload(base_id, "travel.md", text + b"hangar has parking.\n")

    document = await api.ready(base_id, document_id, timeout=60)
    assert (document["chunk_count"], document["error"]) == (2, "")
    assert "knowledge.index_document" in api.stack.worker.text()  # a worker did it
    hits = await api.search(base_id, MARKER)
    assert [(h["document_name"], h["heading"]) for h in hits] == [("travel.md", "Parking")]
    assert MARKER in hits[0]["text"]


async def test_a_worker_killed_mid_indexing_leaves_nothing_stuck(team_api: KnowledgeApi) -> None:
    """kill -9 while the worker indexes: the servers' sweep sends the document again once
    the worker's heartbeat is stale, and the worker started again indexes it."""
    api, stack = team_api, team_api.stack
    worker = stack.worker
    assert worker is not None
    base_id = await api.create_base("Big handbook")
    document_id = await api.upload(base_id, "big.txt", handbook())

    await indexing_now(stack, document_id)
    worker.kill()
    killed_at = time.monotonic()
    assert status_of(stack, document_id) == ("indexing", 0), "indexed before the kill"

    worker.restart()
    await async_wait_for(
        lambda: worker.text().count(" ready.") >= 2,
        timeout=60,
        what="the worker to start again",
        detail=stack.logs,
    )
    document = await api.ready(base_id, document_id, timeout=STALE_SECONDS + 90)
    recovered_after = time.monotonic() - killed_at
    assert document["error"] == "" and document["chunk_count"] > 1000
    assert status_of(stack, document_id) == ("ready", 1)  # sent again once
    hits = await api.search(base_id, MARKER)
    assert hits and MARKER in hits[0]["text"]
    assert recovered_after < STALE_SECONDS + 30  # a stale period and a sweep, then indexing


# --------------------------------------------------------------------- embedded mode


async def test_an_embedded_server_killed_mid_indexing_indexes_it_after_its_restart() -> None:
    """kill -9 of the one server while it indexes: the server started again queues the
    document at its first sweep (its own process started after the claim) and indexes it."""
    with running_stack(mode="embedded", extra_env=FAST_RECOVERY) as stack:
        async with signed_in(stack) as api:
            base_id = await api.create_base("Big handbook")
            document_id = await api.upload(base_id, "big.txt", handbook())

            await indexing_now(stack, document_id)
            stack.daphne.kill()
            killed_at = time.monotonic()
            assert status_of(stack, document_id) == ("indexing", 0), "indexed before the kill"

            await asyncio.to_thread(stack.restart_server)
            await api.browser.login()  # sessions outlive the server; a fresh one anyway
            document = await api.ready(base_id, document_id, timeout=90)
            recovered_after = time.monotonic() - killed_at
            assert document["error"] == "" and document["chunk_count"] > 1000
            assert status_of(stack, document_id) == ("ready", 1)
            hits = await api.search(base_id, MARKER)
            assert hits and MARKER in hits[0]["text"]
            assert recovered_after < 60  # a server's start, its first sweep, the indexing
