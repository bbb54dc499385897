"""Search on SQLite's real FTS5 index: bm25 ranking, headings weighted, Chinese and
Japanese found, ready documents only, and only bases the user may read."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge import retrieval, selectors, services
from tests.knowledge.conftest import add_indexed

pytestmark = pytest.mark.django_db


@pytest.fixture
def base(user):
    return services.base_create(user, "Handbook")


def test_best_match_first_with_where_it_was_found(base) -> None:
    add_indexed(base, "misc.md", "# Misc\n\nThe office has a kitchen. Holidays are mentioned.")
    holidays = add_indexed(
        base,
        "holidays.md",
        "# Holidays\n\nHolidays: everyone gets 25 holidays a year; holidays carry over.",
    )
    hits = retrieval.search(base.owner, [base.pk], "holidays", k=5)
    assert [hit.document_name for hit in hits] == ["holidays.md", "misc.md"]
    first = hits[0]
    assert (first.document_id, first.heading, first.page) == (holidays.pk, "Holidays", None)
    assert first.text.startswith("Holidays: everyone gets 25")
    assert first.score > hits[1].score
    assert retrieval.search(base.owner, [base.pk], "holidays", k=1)[0].document_name == (
        "holidays.md"
    )


def test_words_are_ored_and_punctuation_is_harmless(base) -> None:
    add_indexed(base, "a.txt", "pension rules")
    add_indexed(base, "b.txt", "parking rules")
    assert len(retrieval.search(base.owner, None, 'pension OR "parking" NEAR(*)', k=5)) == 2
    assert retrieval.search(base.owner, None, "   ") == []
    assert retrieval.search(base.owner, None, "nothing-matches-this") == []


def test_chinese_and_japanese_text_is_found(base) -> None:
    add_indexed(base, "zh.md", "# 休假制度\n\n每位员工每年享有二十五天带薪年假，年假可以顺延。")
    add_indexed(base, "ja.md", "# 就業規則\n\n従業員は年間二十五日の有給休暇を取得できます。")
    add_indexed(base, "en.md", "Employees get paid leave.")
    zh = retrieval.search(base.owner, None, "带薪年假")  # 4 characters: split in trigrams
    assert zh[0].document_name == "zh.md"
    assert zh[0].heading == "休假制度"
    ja = retrieval.search(base.owner, None, "有給休暇")
    assert ja[0].document_name == "ja.md"
    # Two characters: below a trigram, found by the substring fallback.
    assert [hit.document_name for hit in retrieval.search(base.owner, None, "年假")] == ["zh.md"]


def test_only_ready_documents_are_searched(base) -> None:
    services.document_add(base, SimpleUploadedFile("queued.txt", b"unicorn"))
    assert retrieval.search(base.owner, None, "unicorn") == []


def test_other_users_bases_are_out_of_reach_unless_shared(base, other_user) -> None:
    add_indexed(base, "secret.md", "The launch code is swordfish.")
    assert retrieval.search(other_user, [base.pk], "swordfish") == []
    assert retrieval.search(other_user, None, "swordfish") == []
    assert list(selectors.readable_bases(other_user)) == []

    team = Group.objects.create(name="team")
    other_user.groups.add(team)
    base.shared_groups.add(team)
    assert [hit.text for hit in retrieval.search(other_user, [base.pk], "swordfish")] == [
        "The launch code is swordfish."
    ]
    base.shared_groups.clear()
    base.shared_with_everyone = True
    base.save()
    assert list(selectors.readable_bases(other_user)) == [base]
    assert len(retrieval.search(other_user, None, "swordfish")) == 1


def test_a_shared_base_is_listed_once_for_several_groups(base, other_user) -> None:
    groups = [Group.objects.create(name=f"g{n}") for n in range(3)]
    other_user.groups.add(*groups)
    base.shared_groups.add(*groups)
    assert list(selectors.readable_bases(other_user)) == [base]


def test_stop_words_do_not_outrank_the_words_that_matter(base) -> None:
    add_indexed(
        base,
        "wordy.md",
        "# Notes\n\nThere is more to do here than there was, and they say that it is what it "
        "is; how they do it is their own affair, and the others do the same when they can.",
    )
    add_indexed(base, "parking.md", "# Parking\n\nPermits for the car park: ask reception.")
    hits = retrieval.search(base.owner, [base.pk], "How do I get a parking permit?", k=5)
    assert [hit.document_name for hit in hits] == ["parking.md"]
    # A query of stop words alone still searches them.
    found = retrieval.search(base.owner, [base.pk], "what is there", k=5)
    assert found[0].document_name == "wordy.md"
