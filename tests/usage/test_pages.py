"""The usage page (``/usage/``) through the real URLconf, middleware and templates: the
signed-in user's tokens and cost per day and per model, the 7/30/90 day switch, the
quota left and when it resets; accessible tables; nothing of another user's; no inline
script or style (the CSP)."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import Group

from llms.models import UsageQuota
from tests.csp import parse_policy
from tests.usage.conftest import spend

pytestmark = pytest.mark.django_db


def text(response) -> str:
    """What a reader sees of a page: its text without tags, spaces collapsed."""
    body = re.sub(r"<[^>]+>", " ", response.content.decode())
    return " ".join(html.unescape(body).split())


def table(response, table_id: str) -> list[str]:
    """The rows of a table as a reader meets them, one string per row."""
    found = re.search(rf'<table id="{table_id}".*?</table>', response.content.decode(), re.DOTALL)
    assert found, f"no table {table_id}"
    rows = re.findall(r"<tr>.*?</tr>", found.group(0), re.DOTALL)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", row)).split()) for row in rows]


def test_the_page_needs_a_sign_in(client) -> None:
    response = client.get("/usage/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_every_page_links_to_it(user_client) -> None:
    assert '<a href="/usage/">Usage</a>' in user_client.get("/").content.decode()


def test_tokens_and_cost_per_day_and_per_model(user_client, user, priced_model) -> None:
    spend(user, priced_model, 1000, 200)
    spend(user, priced_model, 12_000, 800, days_ago=3)
    spend(user, None, 40, 2, days_ago=20)  # a deleted model: tokens, no price

    page = user_client.get("/usage/")
    assert page.status_code == 200
    seen = text(page)
    assert "Last 30 days" in seen
    assert "Tokens 14,042 Runs 3 Cost 0.054 USD" in seen
    by_day = table(page, "usage-by-day")
    assert by_day[0] == "Day Runs Prompt tokens Completion tokens Total tokens Cost"
    assert by_day[1].endswith("1 1,000 200 1,200 0.006 USD")  # today first
    assert by_day[2].endswith("1 12,000 800 12,800 0.048 USD")
    assert by_day[3].endswith("1 40 2 42 —")
    assert table(page, "usage-by-model")[1:] == [
        "Scripted 2 13,000 1,000 14,000 0.054 USD",
        "(deleted model) 1 40 2 42 —",
    ]
    body = page.content.decode()
    assert '<caption id="usage-by-day-caption">Per day</caption>' in body
    assert '<th scope="col">Total tokens</th>' in body and '<th scope="row">' in body


def test_the_period_switch(user_client, user, priced_model) -> None:
    spend(user, priced_model, 1000, 0, days_ago=10)

    week = user_client.get("/usage/?days=7")
    assert '<a href="?days=7" aria-current="page">7 days</a>' in week.content.decode()
    assert "Last 7 days" in text(week)
    assert table(week, "usage-by-day")[1] == "No usage in these 7 days."
    assert "Tokens 0 Runs 0 Cost —" in text(week)

    month = user_client.get("/usage/?days=30")
    assert '<a href="?days=30" aria-current="page">30 days</a>' in month.content.decode()
    assert "Tokens 1,000" in text(month)
    quarter = user_client.get("/usage/?days=90")
    assert '<a href="?days=90" aria-current="page">90 days</a>' in quarter.content.decode()

    # The page's links ask for nothing else; a hand-made value shows the default period.
    odd = user_client.get("/usage/?days=12")
    assert odd.status_code == 200 and "Last 30 days" in text(odd)


def test_the_quota_left_and_when_it_resets(user_client, user, priced_model) -> None:
    assert "No daily token limit. 0 tokens used today." in text(user_client.get("/usage/"))

    team = Group.objects.create(name="team")
    user.groups.add(team)
    UsageQuota.objects.create(group=team, daily_token_limit=50_000)
    spend(user, priced_model, 1000, 234)
    page = user_client.get("/usage/")
    seen = text(page)
    assert "48,766 of your 50,000 tokens left today (1,234 used)." in seen
    assert re.search(r"Your quota resets at 00:00 UTC , in \d+ (hour|minute)", seen), seen
    body = page.content.decode()
    assert '<meter id="quota-meter" min="0" max="50000" value="1234"' in body
    assert re.search(r'<time datetime="\d{4}-\d\d-\d\dT00:00:00\+00:00">00:00 UTC</time>', body)


def test_another_users_usage_never_shows(user_client, user, other_user, priced_model) -> None:
    spend(other_user, priced_model, 77_777, 1)
    UsageQuota.objects.create(user=other_user, daily_token_limit=90_000)
    seen = text(user_client.get("/usage/"))
    assert "77,778" not in seen and "90,000" not in seen
    assert "Tokens 0 Runs 0 Cost —" in seen and "No daily token limit." in seen


def test_no_inline_script_or_style(user_client, user, priced_model) -> None:
    spend(user, priced_model, 1000, 200)
    page = user_client.get("/usage/")
    body = page.content.decode()
    policy = parse_policy(page["Content-Security-Policy"])
    assert policy["script-src"] == ["'self'"] and policy["style-src"] == ["'self'"]
    assert " style=" not in body and "<style" not in body
    assert not re.search(r"<script(?![^>]*\bsrc=)", body)  # every script is a file
    assert not re.search(r"\son[a-z]+=", body)  # no inline handlers
    assert "/static/css/usage.css" in body


def test_only_get(user_client) -> None:
    assert user_client.post("/usage/").status_code == 405
