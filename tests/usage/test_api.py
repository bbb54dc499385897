"""``GET /api/usage``: the caller's tokens and cost per day and per model over 7, 30 or 90
days, and today's quota; every refusal in the API's error shape; never another user's
usage; documented in the OpenAPI document. The last tests run real runs against the
scripted server and read what they cost."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.utils import timezone

from conversations.runs import launcher
from llms.models import LLMModel, Provider, UsageQuota
from llms.selectors import next_reset
from tests.usage.conftest import spend

pytestmark = pytest.mark.django_db

PERIOD_ERROR = {"error": "'days' must be 7, 30 or 90.", "fields": {"days": ["One of 7, 30 or 90."]}}


@pytest.fixture
def euro_model(priced_model) -> LLMModel:
    """A second model of another provider, priced in euros."""
    provider = Provider.objects.create(name="euro-cloud", base_url="http://euro.test/v1")
    return LLMModel.objects.create(
        provider=provider,
        model_id="euro-large",
        display_name="Euro Large",
        input_price=Decimal("1.25"),
        output_price=Decimal("5"),
        currency="EUR",
    )


@pytest.fixture
def free_model(priced_model) -> LLMModel:
    """A model without prices (a local one)."""
    return LLMModel.objects.create(
        provider=priced_model.provider, model_id="local", display_name="Local"
    )


def cost(*amounts: tuple[str, str]) -> list[dict[str, str]]:
    return [{"amount": amount, "currency": currency} for amount, currency in amounts]


# ------------------------------------------------------------------------ refusals


def test_usage_needs_credentials(anon_api, client) -> None:
    response = anon_api.get("/api/usage")
    assert response.status_code == 401
    assert response.json()["error"].startswith("Authentication required")
    wrong = client.get("/api/usage", headers={"Authorization": "Bearer not-a-token"})
    assert wrong.status_code == 401


@pytest.mark.parametrize(
    "days", ["14", "0", "-7", "1", "365", "7.0", "30days", "thirty", "true", "9" * 40]
)
def test_any_other_period_is_a_400_naming_days(api, days) -> None:
    response = api.get("/api/usage", days=days)
    assert response.status_code == 400
    assert response.json() == PERIOD_ERROR


def test_only_get_is_allowed(api) -> None:
    response = api.post("/api/usage", {})
    assert response.status_code == 405 and response["Allow"] == "GET"
    assert response.json() == {"error": "Method POST not allowed."}


# ------------------------------------------------------------------------- figures


def test_an_empty_period_says_so_with_zeros(api) -> None:
    body = api.get("/api/usage").json()
    today = timezone.localdate()
    assert body == {
        "days": 30,
        "since": (today - dt.timedelta(days=29)).isoformat(),
        "until": today.isoformat(),
        "total": {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "total_tokens": 0,
            "runs": 0,
            "cost": [],
        },
        "by_day": [],
        "by_model": [],
        "quota": {
            "limit": None,
            "used_today": 0,
            "left": None,
            "resets_at": body["quota"]["resets_at"],
        },
    }


def test_tokens_and_cost_per_day_and_per_model_over_each_period(
    api, user, priced_model, euro_model, free_model
) -> None:
    spend(user, priced_model, 1000, 200)  # today: 0.006 USD
    spend(user, euro_model, 2000, 400)  # today: 0.0025 + 0.002 = 0.0045 EUR
    spend(user, free_model, 50, 50)  # today: no price
    spend(user, priced_model, 10_000, 0, days_ago=6)  # the 7-day period's first day: 0.03
    spend(user, priced_model, 0, 1000, days_ago=7)  # before it: 0.015
    spend(user, euro_model, 100_000, 0, days_ago=29)  # 0.125 EUR
    spend(user, priced_model, 1_000_000, 0, days_ago=89)  # 3 USD
    spend(user, priced_model, 1, 1, days_ago=90)  # in no period

    week = api.get("/api/usage", days="7").json()
    today = timezone.localdate()
    assert (week["days"], week["since"]) == (7, (today - dt.timedelta(days=6)).isoformat())
    assert week["total"] == {
        "prompt_tokens": 13_050,
        "completion_tokens": 650,
        "total_tokens": 13_700,
        "runs": 4,
        "cost": cost(("0.004500", "EUR"), ("0.036000", "USD")),
    }
    assert [(d["day"], d["total_tokens"], d["cost"]) for d in week["by_day"]] == [
        (today.isoformat(), 3700, cost(("0.004500", "EUR"), ("0.006000", "USD"))),
        ((today - dt.timedelta(days=6)).isoformat(), 10_000, cost(("0.030000", "USD"))),
    ]
    assert [
        (m["model_id"], m["name"], m["provider"], m["total_tokens"], m["runs"], m["cost"])
        for m in week["by_model"]
    ] == [
        (priced_model.pk, "Scripted", "scripted", 11_200, 2, cost(("0.036000", "USD"))),
        (euro_model.pk, "Euro Large", "euro-cloud", 2400, 1, cost(("0.004500", "EUR"))),
        (free_model.pk, "Local", "scripted", 100, 1, []),
    ]

    month = api.get("/api/usage", days="30").json()
    assert month["total"]["total_tokens"] == 13_700 + 1000 + 100_000
    assert month["total"]["cost"] == cost(("0.129500", "EUR"), ("0.051000", "USD"))
    assert len(month["by_day"]) == 4
    assert api.get("/api/usage").json() == month  # 30 days by default, and blank too
    assert api.get("/api/usage", days="").json() == month

    quarter = api.get("/api/usage", days="90").json()
    assert quarter["total"]["total_tokens"] == 13_700 + 1000 + 100_000 + 1_000_000
    assert quarter["total"]["cost"] == cost(("0.129500", "EUR"), ("3.051000", "USD"))
    assert quarter["by_day"][-1]["day"] == (today - dt.timedelta(days=89)).isoformat()


def test_a_deleted_models_usage_stays_counted(api, user, euro_model) -> None:
    spend(user, euro_model, 1000, 0)
    euro_model.delete()
    [line] = api.get("/api/usage").json()["by_model"]
    assert (line["model_id"], line["name"], line["provider"]) == (None, "(deleted model)", "")
    assert (line["total_tokens"], line["cost"]) == (1000, cost(("0.001250", "EUR")))


def test_another_users_usage_never_shows(api, client, other_token, user, other_user, priced_model):
    spend(user, priced_model, 100, 10)
    spend(other_user, priced_model, 7777, 3333)
    UsageQuota.objects.create(user=other_user, daily_token_limit=20_000)

    mine = api.get("/api/usage").json()
    assert mine["total"]["total_tokens"] == 110 and mine["quota"]["used_today"] == 110
    assert mine["quota"]["limit"] is None  # bob's quota is bob's
    assert "7777" not in str(mine) and "11110" not in str(mine)

    theirs = client.get("/api/usage", headers={"Authorization": f"Bearer {other_token}"}).json()
    assert theirs["total"]["total_tokens"] == 11_110
    assert theirs["quota"] == {**theirs["quota"], "limit": 20_000, "left": 8890}
    # No parameter names another user: an extra one is ignored, the caller's usage comes back.
    assert api.get("/api/usage", user=str(other_user.pk)).json() == mine


def test_the_quota_left_and_when_it_resets(api, user, priced_model) -> None:
    team = Group.objects.create(name="team")
    user.groups.add(team)
    UsageQuota.objects.create(group=team, daily_token_limit=5000)
    UsageQuota.objects.create(user=user, daily_token_limit=3000)  # the smallest wins
    spend(user, priced_model, 1000, 200)
    spend(user, priced_model, 999, 0, days_ago=1)  # yesterday's does not count

    quota = api.get("/api/usage", days="7").json()["quota"]
    resets_at = dt.datetime.fromisoformat(quota["resets_at"])
    assert (quota["limit"], quota["used_today"], quota["left"]) == (3000, 1200, 1800)
    assert resets_at == next_reset()

    spend(user, priced_model, 5000, 0)  # over: nothing left, never negative
    quota = api.get("/api/usage").json()["quota"]
    assert (quota["used_today"], quota["left"]) == (6200, 0)


def test_the_quota_resets_at_the_next_local_midnight(api, settings) -> None:
    settings.TIME_ZONE = "Pacific/Auckland"
    resets_at = dt.datetime.fromisoformat(api.get("/api/usage").json()["quota"]["resets_at"])
    local = resets_at.astimezone(ZoneInfo("Pacific/Auckland"))
    assert local.time() == dt.time(0, 0)
    assert local.date() == timezone.localdate() + dt.timedelta(days=1)
    assert dt.timedelta(0) < resets_at - timezone.now() <= dt.timedelta(days=1)


# ------------------------------------------------------------------------- document


def test_the_operation_is_documented(api) -> None:
    document = api.get("/api/schema").json()
    operation = document["paths"]["/api/usage"]["get"]
    assert operation["operationId"] == "getUsage"
    assert operation["summary"].startswith("Your tokens and their cost")
    assert operation["tags"] == ["usage"]
    [days] = operation["parameters"]
    assert (days["name"], days["in"]) == ("days", "query")
    assert days["schema"]["enum"] == [7, 30, 90] and days["schema"]["default"] == 30
    assert set(operation["responses"]) == {"200", "400", "401", "429"}
    assert "`fields` says what to fix" in operation["responses"]["400"]["description"]
    report = document["components"]["schemas"]["UsageReport"]
    assert {"total", "by_day", "by_model", "quota"} <= set(report["required"])


# ---------------------------------------------------------------------- real runs


@pytest.mark.django_db(transaction=True)
async def test_runs_show_their_tokens_and_cost(http, user, priced_model, llm_server) -> None:
    """Two questions answered by the scripted server through the API: each run keeps its
    cost, and the usage adds them up."""
    llm_server.push(
        {"content": "Forty-two.", "usage": {"prompt_tokens": 1000, "completion_tokens": 200}},
        {"content": "Still 42.", "usage": {"prompt_tokens": 3000, "completion_tokens": 100}},
    )
    # Titled by the user: no title call after the first answer, only the two runs spend.
    created = await http.post("/api/conversations", json={"title": "Costs"})
    conversation_id = created.json()["id"]
    for question in ("What is 6*7?", "Sure?"):
        posted = await http.post(
            f"/api/conversations/{conversation_id}/messages", json={"content": question}
        )
        assert posted.status_code == 202, posted.text
        await launcher.wait_for(posted.json()["run_id"])

    runs = (await http.get(f"/api/conversations/{conversation_id}")).json()["runs"]
    assert [run["status"] for run in runs] == ["succeeded", "succeeded"]
    assert [run["usage"] for run in runs] == [
        {
            "prompt_tokens": 1000,
            "completion_tokens": 200,
            "total_tokens": 1200,
            "cost": "0.006000",
            "currency": "USD",
        },
        {
            "prompt_tokens": 3000,
            "completion_tokens": 100,
            "total_tokens": 3100,
            "cost": "0.010500",
            "currency": "USD",
        },
    ]

    usage = (await http.get("/api/usage", params={"days": 7})).json()
    expected = {
        "prompt_tokens": 4000,
        "completion_tokens": 300,
        "total_tokens": 4300,
        "runs": 2,
        "cost": cost(("0.016500", "USD")),
    }
    assert usage["total"] == expected
    assert usage["by_day"] == [{"day": timezone.localdate().isoformat(), **expected}]
    assert usage["by_model"] == [
        {"model_id": priced_model.pk, "name": "Scripted", "provider": "scripted", **expected}
    ]
    assert usage["quota"]["used_today"] == 4300
    quota_rows = await sync_to_async(UsageQuota.objects.count)()
    assert quota_rows == 0 and usage["quota"]["limit"] is None
