"""Vector search on PostgreSQL with pgvector: the vectors' table with its HNSW index,
searches scoped to what the user may read, fused with full text, and a deleted
document's vectors gone with its chunks (the foreign key's cascade).

pgvector is a server extension the project cannot install on Debian 12 (no package
there; PostgreSQL's own apt repository and Debian 13 have ``postgresql-NN-pgvector``,
the compose file uses the pgvector image): without it this test is skipped, saying so.
"""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from testing.scripted_server import ScriptedServer
from tests.integration.stack import run_on_fresh_postgres

pytestmark = pytest.mark.integration

SCRIPT = textwrap.dedent(
    """
    import json
    import os

    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile

    from files import services as file_services
    from knowledge import indexing, retrieval, services, vectors
    from knowledge.models import Document
    from llms.models import EmbeddingModel, Provider

    if vectors.unavailable_reason():
        print(json.dumps({"unavailable": vectors.unavailable_reason()}))
        raise SystemExit(0)
    provider = Provider.objects.create(name="embed", base_url=os.environ["EMBED_URL"])
    model = EmbeddingModel.objects.create(provider=provider, model_id="e", dimensions=256)
    User = get_user_model()
    alice = User.objects.create_user(username="alice", password="pw-alice-123")
    bob = User.objects.create_user(username="bob", password="pw-bob-123")
    base = services.base_create(alice, "Handbook")
    other = services.base_create(bob, "Bob's")
    texts = {
        base: {
            "holidays.md": "# Holidays\\n\\nEvery employee has twenty-five paid holidays.",
            "laptops.md": "# Laptops\\n\\nLaptops are replaced every three years.",
        },
        other: {"secret.md": "# Holidays\\n\\nBob's paid holidays plan."},
    }
    for owner_base, files in texts.items():
        for name, text in files.items():
            # The row as document_add makes it, indexed here: this process runs no
            # background work for the on-commit scheduling.
            stored = file_services.store(owner_base.owner, SimpleUploadedFile(name, text.encode()))
            document = Document.objects.create(base=owner_base, file=stored, name=stored.name)
            assert indexing.index_document(document.pk) == "ready", document.pk

    def names(user, query, methods=retrieval.METHODS):
        hits = retrieval.search(user, None, query, k=5, methods=methods)
        return [hit.document_name for hit in hits]

    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'knowledge_chunk_vec256'")
        indexes = [row[0] for row in cursor.fetchall()]
        cursor.execute("SELECT count(*) FROM knowledge_chunk_vec256")
        before = cursor.fetchone()[0]
        services.document_delete(Document.objects.get(name="laptops.md"))
        cursor.execute("SELECT count(*) FROM knowledge_chunk_vec256")
        after = cursor.fetchone()[0]
    print(json.dumps({
        "indexes": indexes,
        "embedded_with": sorted(set(Document.objects.values_list("embedded_with", flat=True))),
        "signature": model.signature,
        "vector": names(alice, "paid holidays each year", ("vector",)),
        "fused": names(alice, "paid holidays"),
        "bob": names(bob, "paid holidays", ("vector",)),
        "rows": [before, after],
    }))
    """
)


def test_vector_search_on_postgres(tmp_path) -> None:
    with ScriptedServer() as embedder:
        result: subprocess.CompletedProcess[str] = run_on_fresh_postgres(
            tmp_path, SCRIPT, extra_env={"EMBED_URL": embedder.base_url}
        )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    if "unavailable" in out:
        pytest.skip(out["unavailable"])
    assert any("USING hnsw (embedding vector_cosine_ops)" in index for index in out["indexes"])
    assert out["embedded_with"] == [out["signature"]]
    assert out["vector"][0] == "holidays.md"
    assert out["fused"][0] == "holidays.md"
    assert out["bob"] == ["secret.md"]  # alice's documents are not bob's to find
    assert out["rows"] == [3, 2]


REFUSED_SCRIPT = textwrap.dedent(
    """
    import json
    import os

    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.db import connection

    from files import services as file_services
    from knowledge import indexing, retrieval, services, vectors
    from knowledge.models import Document
    from llms.models import EmbeddingModel, Provider

    role = f"no_extensions_{os.getpid()}"
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        superuser = cursor.fetchone()[0]
        if superuser:  # act as a role that may write the tables but not add extensions
            cursor.execute(f"CREATE ROLE {role} NOSUPERUSER")
            cursor.execute(f"GRANT ALL ON SCHEMA public TO {role}")
            cursor.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
            cursor.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}")
            cursor.execute(f"SET ROLE {role}")
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
        installed = cursor.fetchone() is not None
    try:
        provider = Provider.objects.create(name="embed", base_url=os.environ["EMBED_URL"])
        EmbeddingModel.objects.create(provider=provider, model_id="e", dimensions=256)
        alice = get_user_model().objects.create_user(username="alice", password="pw-a-123")
        base = services.base_create(alice, "Handbook")
        text = "# Holidays\\n\\nEvery employee has twenty-five paid holidays."
        stored = file_services.store(alice, SimpleUploadedFile("holidays.md", text.encode()))
        document = Document.objects.create(base=base, file=stored, name=stored.name)
        status = indexing.index_document(document.pk)
        document.refresh_from_db()
        hits = retrieval.search(alice, None, "paid holidays", k=5)
        print(json.dumps({
            "installed": installed,
            "available": vectors.unavailable_reason() is None,
            "status": status,
            "error": document.error,
            "embedded_with": document.embedded_with,
            "found": [hit.document_name for hit in hits],
        }))
    finally:
        if superuser:
            with connection.cursor() as cursor:
                cursor.execute("RESET ROLE")
                cursor.execute(f"DROP OWNED BY {role}")
                cursor.execute(f"DROP ROLE {role}")
    """
)


def test_a_database_that_refuses_vectors_leaves_documents_found_by_full_text(tmp_path) -> None:
    """pgvector present but CREATE EXTENSION refused (a role that is not a superuser), or
    pgvector absent: either way the document is ready, found by full text, and its row
    says why it has no vectors."""
    with ScriptedServer() as embedder:
        result = run_on_fresh_postgres(
            tmp_path, REFUSED_SCRIPT, extra_env={"EMBED_URL": embedder.base_url}
        )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    if out["installed"]:
        pytest.skip("the database given already has pgvector: nothing to refuse")
    assert out["status"] == "ready" and out["found"] == ["holidays.md"]
    assert out["embedded_with"] == ""
    if out["available"]:  # pgvector is there: the role may not add it
        assert out["error"] == (
            "Found by full-text search only, without vectors: the database refused to "
            "create the table for vectors (see the log)."
        )
    else:
        assert out["error"] == (
            "Found by full-text search only, without vectors: PostgreSQL has no pgvector "
            "extension (package postgresql-NN-pgvector)."
        )
