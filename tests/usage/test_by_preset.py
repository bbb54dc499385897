"""The admin's usage dashboard by preset (issue 46): the tokens, runs and cost of the runs
of conversations started from each preset, within the period; chats without a preset and
runs that ended before the period are not counted."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from django.utils import timezone

from conversations.models import Conversation, Preset, Run
from tests.usage.test_admin import DASHBOARD, EXPORT
from tests.usage.test_pages import table

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, staff_user):
    client.force_login(staff_user)
    return client


def ran(user, preset, prompt: int, completion: int, *, cost: str = "", days_ago: int = 0) -> None:
    conversation = Conversation.objects.create(owner=user, preset=preset)
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cost:
        usage |= {"cost": cost, "currency": "USD"}
    Run.objects.create(
        conversation=conversation,
        status=Run.Status.SUCCEEDED,
        usage=usage,
        finished_at=timezone.now() - dt.timedelta(days=days_ago),
    )


def test_the_dashboard_has_each_presets_use_in_the_period(admin_client, user, other_user) -> None:
    reviewer = Preset.objects.create(owner=user, name="SQL reviewer")
    writer = Preset.objects.create(owner=None, name="Writer")
    ran(user, reviewer, 1000, 200, cost="0.006")
    ran(other_user, reviewer, 3000, 0, cost="0.009", days_ago=3)
    ran(user, writer, 10, 5)  # a model without prices
    ran(user, writer, 99_999, 1, days_ago=40)  # before the 30 days
    ran(user, None, 50_000, 0, cost="1")  # no preset

    page = admin_client.get(DASHBOARD + "?days=30")
    assert table(page, "usage-by-preset")[1:] == [
        "SQL reviewer 2 4,000 200 4,200 0.015 USD",
        "Writer 1 10 5 15 —",
    ]
    assert table(page, "usage-by-preset")[0].startswith("Preset ")
    assert '<table id="usage-by-preset" class="usage-table">\n    <caption>By preset</caption>' in (
        page.content.decode()
    )
    ninety = admin_client.get(DASHBOARD + "?days=90")
    assert table(ninety, "usage-by-preset")[1:] == [
        "Writer 2 100,009 6 100,015 —",
        "SQL reviewer 2 4,000 200 4,200 0.015 USD",
    ]


def test_without_presets_in_use_the_table_says_so(admin_client) -> None:
    page = admin_client.get(DASHBOARD + "?days=7")
    assert table(page, "usage-by-preset")[1:] == ["No usage in this period."]


def test_the_preset_table_exports_as_csv(admin_client, user) -> None:
    reviewer = Preset.objects.create(owner=user, name="=SQL reviewer")
    ran(user, reviewer, 1000, 200, cost="0.006")
    ran(user, Preset.objects.create(owner=user, name="Writer"), 10, 5)
    page = admin_client.get(DASHBOARD + "?days=7").content.decode()
    assert f'href="{EXPORT}?days=7&amp;table=preset" download>By preset (CSV)</a>' in page

    response = admin_client.get(EXPORT + "?days=7&table=preset")
    assert response.status_code == 200
    assert "usage-by-preset-7-days-to-" in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows == [
        ["name", "prompt_tokens", "completion_tokens", "total_tokens", "runs", "cost", "currency"],
        ["'=SQL reviewer", "1000", "200", "1200", "1", "0.006000", "USD"],
        ["Writer", "10", "5", "15", "1", "", ""],
    ]
    assert admin_client.get(EXPORT + "?days=7&table=nothing").status_code == 404
