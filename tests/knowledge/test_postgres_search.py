"""Knowledge search on PostgreSQL: the migration's GIN index over the tsvector written at
indexing, ``SearchRank`` ordering, words OR'ed, and Chinese (which the 'simple' parser
keeps as one word per run) ranked through their two-character pieces."""

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
    from django.core.files.uploadedfile import SimpleUploadedFile

    from knowledge import indexing, retrieval, services

    indexing.schedule = lambda document_id: True  # indexed below, in this process
    User = get_user_model()
    alice = User.objects.create_user(username="alice", password="pw-alice-123")
    bob = User.objects.create_user(username="bob", password="pw-bob-123")
    base = services.base_create(alice, "Handbook")
    texts = {
        "misc.md": "# Misc\\n\\nThe office has a kitchen. Holidays are mentioned.",
        "holidays.md": "# Holidays\\n\\nHolidays: 25 holidays a year; holidays carry over.",
        "zh.md": "# 休假制度\\n\\n每位员工每年享有二十五天带薪年假。",
        "zh-travel.md": "# 差旅\\n\\n出差期间的年假安排请提前告知经理。",
        "ja.md": "# 経費精算\\n\\n出張のホテル代は一泊一万五千円まで精算できます。",
    }
    for name, text in texts.items():
        document = services.document_add(base, SimpleUploadedFile(name, text.encode()))
        assert indexing.index_document(document.pk) == "ready", document.pk

    def names(user, query):
        return [hit.document_name for hit in retrieval.search(user, [base.pk], query, k=5)]

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'knowledge_chunk_search_gin'"
        )
        index = cursor.fetchone()[0]
    hits = retrieval.search(alice, [base.pk], "holidays", k=5)
    print(json.dumps({
        "index": index,
        "holidays": [hit.document_name for hit in hits],
        "scores_descend": hits[0].score > hits[1].score,
        "ored": names(alice, "kitchen carry"),
        "chinese": names(alice, "带薪年假"),
        "chinese_ranked": retrieval.search(alice, [base.pk], "带薪年假", k=5)[0].score > 0,
        "japanese": names(alice, "ホテル代の上限"),
        "bob": names(bob, "holidays"),
    }))
    """
)


def test_full_text_search_on_postgres(tmp_path) -> None:
    result = run_on_fresh_postgres(tmp_path, SCRIPT)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert "USING gin (search)" in out["index"]
    assert out["holidays"] == ["holidays.md", "misc.md"]
    assert out["scores_descend"] is True
    assert sorted(out["ored"]) == ["holidays.md", "misc.md"]
    # Ranked (bigrams in the tsvector), not the unranked substring fallback: the passage
    # with the whole phrase first, the one sharing only "年假" after it.
    assert out["chinese"] == ["zh.md", "zh-travel.md"]
    assert out["chinese_ranked"] is True
    assert out["japanese"] == ["ja.md"]
    assert out["bob"] == []
