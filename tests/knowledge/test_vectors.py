"""Vector search over knowledge bases (SQLite with sqlite-vec): an admin enables an
embedding model (the scripted server's /embeddings, a deterministic hashing embedder),
documents get vectors when indexed, searches rank by them and by full text, fused; a
model that is down leaves full-text search and says so."""

from __future__ import annotations

import pytest
from django.db import connection

from knowledge import indexing, retrieval, services, vectors
from knowledge.models import Chunk
from llms.models import EmbeddingModel, Provider
from tests.knowledge.conftest import add_indexed

pytestmark = pytest.mark.django_db

HOLIDAYS = "# Holidays\n\nEvery employee has twenty-five paid holidays a year."
LAPTOPS = "# Laptops\n\nLaptops are replaced every three years by the IT desk."


@pytest.fixture(autouse=True)
def vectors_here() -> None:
    reason = vectors.unavailable_reason()
    assert reason is None, (
        f"{reason} The project's Makefile picks a Python whose sqlite3 loads extensions."
    )


@pytest.fixture
def provider(llm_server) -> Provider:
    return Provider.objects.create(name="embeddings", base_url=llm_server.base_url)


@pytest.fixture
def embedding_model(provider, llm_server) -> EmbeddingModel:
    return EmbeddingModel.objects.create(
        provider=provider, model_id="scripted-embed", dimensions=llm_server.embedding_dims
    )


def _vector_rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM knowledge_chunk_vec256")
        return cursor.fetchone()[0]


def test_indexed_documents_get_vectors_and_vector_search_ranks_them(
    user, embedding_model, llm_server
):
    base = services.base_create(user, "Handbook")
    holidays = add_indexed(base, "holidays.md", HOLIDAYS)
    add_indexed(base, "laptops.md", LAPTOPS)

    assert holidays.embedded_with == embedding_model.signature
    assert holidays.error == ""
    assert _vector_rows() == Chunk.objects.count() == 2
    sent = [text for body in llm_server.embedding_requests for text in body["input"]]
    assert any("twenty-five paid holidays" in text for text in sent)

    hits = retrieval.search(user, [base.pk], "paid holidays each year", methods=("vector",))
    assert [hit.document_name for hit in hits][0] == "holidays.md"
    assert hits[0].score > hits[-1].score


def test_fused_search_finds_what_either_ranking_finds(user, embedding_model):
    base = services.base_create(user, "Handbook")
    add_indexed(base, "holidays.md", HOLIDAYS)
    add_indexed(base, "laptops.md", LAPTOPS)

    fused = retrieval.search(user, [base.pk], "laptops replaced", k=2)
    assert fused[0].document_name == "laptops.md"
    both = {hit.document_name for hit in retrieval.search(user, [base.pk], "holidays laptops")}
    assert both == {"holidays.md", "laptops.md"}


def test_reciprocal_rank_fusion_rewards_agreement():
    fused = retrieval.fuse([[(1, 9.0), (2, 5.0), (3, 1.0)], [(3, 0.9), (1, 0.8)]], k=3)
    assert [chunk_id for chunk_id, _ in fused] == [1, 3, 2]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)


def test_vector_search_keeps_to_what_the_user_may_read(user, other_user, embedding_model):
    mine = services.base_create(user, "Mine")
    theirs = services.base_create(other_user, "Theirs")
    add_indexed(mine, "laptops.md", LAPTOPS)
    add_indexed(theirs, "holidays.md", HOLIDAYS)

    hits = retrieval.search(user, None, "paid holidays", methods=("vector",))
    assert [hit.document_name for hit in hits] == ["laptops.md"]
    assert retrieval.search(user, [theirs.pk], "paid holidays") == []


def test_a_deleted_document_takes_its_vectors(user, embedding_model):
    base = services.base_create(user, "Handbook")
    holidays = add_indexed(base, "holidays.md", HOLIDAYS)
    add_indexed(base, "laptops.md", LAPTOPS)

    services.document_delete(holidays)
    assert _vector_rows() == 1
    hits = retrieval.search(user, [base.pk], "paid holidays", methods=("vector",))
    assert [hit.document_name for hit in hits] == ["laptops.md"]


def test_an_embedding_model_that_is_down_leaves_full_text_and_says_so(
    user, embedding_model, llm_server
):
    llm_server.embedding_status = 503
    base = services.base_create(user, "Handbook")
    holidays = add_indexed(base, "holidays.md", HOLIDAYS)

    assert holidays.embedded_with == ""
    assert "full-text search only" in holidays.error
    assert "HTTP 503" in holidays.error
    hits = retrieval.search(user, [base.pk], "holidays")
    assert [hit.document_name for hit in hits] == ["holidays.md"]


def test_documents_of_another_model_are_left_to_full_text(user, embedding_model, provider):
    base = services.base_create(user, "Handbook")
    add_indexed(base, "holidays.md", HOLIDAYS)
    embedding_model.enabled = False
    embedding_model.save()
    EmbeddingModel.objects.create(provider=provider, model_id="other-embed", dimensions=64)

    assert retrieval.search(user, [base.pk], "paid holidays", methods=("vector",)) == []
    found = retrieval.search(user, [base.pk], "paid holidays")
    assert [hit.document_name for hit in found] == ["holidays.md"]


def test_vectors_of_another_length_replace_the_old_table(user, embedding_model, provider):
    base = services.base_create(user, "Handbook")
    add_indexed(base, "holidays.md", HOLIDAYS)
    embedding_model.enabled = False
    embedding_model.save()
    EmbeddingModel.objects.create(provider=provider, model_id="wider", dimensions=32)
    laptops = add_indexed(base, "laptops.md", LAPTOPS)

    tables = connection.introspection.table_names()
    assert "knowledge_chunk_vec32" in tables
    assert not [table for table in tables if table.startswith("knowledge_chunk_vec256")]
    assert laptops.embedded_with.endswith(":32")
    hits = retrieval.search(user, [base.pk], "laptops replaced", methods=("vector",))
    assert [hit.document_name for hit in hits] == ["laptops.md"]


def test_the_admin_finds_the_vector_length_with_a_test_call(admin_client, provider, llm_server):
    response = admin_client.post(
        "/admin/llms/embeddingmodel/add/",
        {"provider": provider.pk, "model_id": "scripted-embed", "batch_size": 16, "enabled": "on"},
    )
    assert response.status_code == 302, response.content[:2000]
    assert EmbeddingModel.objects.get().dimensions == llm_server.embedding_dims


def test_the_admin_refuses_an_embedding_model_that_does_not_answer(
    admin_client, provider, llm_server
):
    llm_server.embedding_status = 404
    response = admin_client.post(
        "/admin/llms/embeddingmodel/add/",
        {"provider": provider.pk, "model_id": "missing", "batch_size": 16, "enabled": "on"},
    )
    assert response.status_code == 200
    assert "answered HTTP 404" in response.content.decode()
    assert not EmbeddingModel.objects.exists()


def test_the_admin_reindexes_documents_indexed_before_the_model(
    admin_client, client, user, token, provider
):
    base = services.base_create(user, "Handbook")
    holidays = add_indexed(base, "holidays.md", HOLIDAYS)
    assert holidays.embedded_with == ""
    model = EmbeddingModel.objects.create(provider=provider, model_id="e", dimensions=256)

    response = admin_client.post(
        "/admin/knowledge/knowledgebase/",
        {"action": "reindex_documents", "_selected_action": [base.pk]},
    )
    assert response.status_code == 302
    holidays.refresh_from_db()
    assert holidays.status == "queued"
    indexing.index_document(holidays.pk)  # the background work, here (nothing commits)

    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    listed = client.get(f"/api/knowledge/{base.pk}/documents", **auth).json()
    assert listed[0]["status"] == "ready"
    assert listed[0]["vectors"] is True
    holidays.refresh_from_db()
    assert holidays.embedded_with == model.signature
