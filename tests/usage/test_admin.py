"""The admin's side of usage: prices on the model's page (refused when nonsense), the usage
dashboard by user, group and model for 7/30/90 days (staff with the view permission only),
and its CSV export, one row per day, user and model."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse
from django.utils import timezone

from llms.models import LLMModel, Provider
from tests.llms.test_admin import form_data
from tests.usage.conftest import spend
from tests.usage.test_pages import table, text

pytestmark = pytest.mark.django_db

DASHBOARD = "/admin/llms/usagerecord/dashboard/"
EXPORT = "/admin/llms/usagerecord/dashboard/export.csv"


@pytest.fixture
def admin_client(client, staff_user):
    client.force_login(staff_user)
    return client


@pytest.fixture
def spent(user, other_user, django_user_model, priced_model):
    """alice (teams red and blue), bob (red) and carol (no group), over two models."""
    red, blue = Group.objects.create(name="red"), Group.objects.create(name="blue")
    user.groups.add(red, blue)
    other_user.groups.add(red)
    carol = django_user_model.objects.create_user(username="carol", password="pw-carol-123")
    provider = Provider.objects.create(name="euro-cloud", base_url="http://euro.test/v1")
    euro = LLMModel.objects.create(
        provider=provider, model_id="euro-large", input_price=Decimal("2"), currency="EUR"
    )
    spend(user, priced_model, 1000, 200)  # 0.006 USD
    spend(user, euro, 5000, 0, days_ago=2)  # 0.01 EUR
    spend(other_user, priced_model, 2000, 0, days_ago=8)  # 0.006 USD
    spend(carol, priced_model, 0, 100, days_ago=40)  # 0.0015 USD
    return {"carol": carol, "euro": euro}


def test_prices_are_set_on_the_models_page(admin_client, priced_model) -> None:
    url = reverse("admin:llms_llmmodel_change", args=[priced_model.pk])
    page = admin_client.get(url)
    body = page.content.decode()
    assert re.search(r'<h2 [^>]*class="fieldset-heading">Prices</h2>', body)
    assert "Per million tokens, as the provider bills them." in body
    for name in ("input_price", "output_price", "currency"):
        assert f'name="{name}"' in body

    data = form_data(page) | {"input_price": "0.15", "output_price": "0.60", "currency": "eur"}
    saved = admin_client.post(url, data)
    assert saved.status_code == 302, saved.content
    priced_model.refresh_from_db()
    assert (priced_model.input_price, priced_model.output_price, priced_model.currency) == (
        Decimal("0.15"),
        Decimal("0.60"),
        "EUR",
    )

    cleared = admin_client.post(url, data | {"input_price": "", "output_price": ""})
    assert cleared.status_code == 302
    priced_model.refresh_from_db()
    assert priced_model.input_price is None and priced_model.output_price is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("input_price", "-1", "A price cannot be negative"),
        ("output_price", "-0.01", "A price cannot be negative"),
        ("currency", "us", "three-letter ISO 4217 code"),
        ("currency", "U$D", "three-letter ISO 4217 code"),
    ],
)
def test_nonsense_prices_are_refused(admin_client, priced_model, field, value, message) -> None:
    url = reverse("admin:llms_llmmodel_change", args=[priced_model.pk])
    data = form_data(admin_client.get(url)) | {field: value}
    refused = admin_client.post(url, data)
    assert refused.status_code == 200 and message in refused.content.decode()
    priced_model.refresh_from_db()
    assert (priced_model.input_price, priced_model.currency) == (Decimal("3.0000"), "USD")


# ---------------------------------------------------------------------- dashboard


def test_the_dashboard_is_linked_from_the_usage_list(admin_client) -> None:
    changelist = admin_client.get(reverse("admin:llms_usagerecord_changelist"))
    assert f'<a href="{DASHBOARD}">Usage dashboard</a>' in changelist.content.decode()
    assert reverse("admin:llms_usagerecord_dashboard") == DASHBOARD


def test_the_dashboard_by_user_group_and_model(admin_client, spent) -> None:
    page = admin_client.get(DASHBOARD + "?days=30")
    assert page.status_code == 200
    assert table(page, "usage-total")[1] == "All users 3 8,000 200 8,200 0.01 EUR + 0.012 USD"
    assert table(page, "usage-by-user")[1:] == [
        "alice 2 6,000 200 6,200 0.01 EUR + 0.006 USD",
        "bob 1 2,000 0 2,000 0.006 USD",
    ]
    assert table(page, "usage-by-group")[1:] == [
        "red 3 8,000 200 8,200 0.01 EUR + 0.012 USD",
        "blue 2 6,000 200 6,200 0.01 EUR + 0.006 USD",
    ]
    assert table(page, "usage-by-model")[1:] == [
        "euro-large (euro-cloud) 1 5,000 0 5,000 0.01 EUR",
        "Scripted (scripted) 2 3,000 200 3,200 0.012 USD",
    ]
    assert len(table(page, "usage-by-day")) == 1 + 3
    assert "A user in several groups counts in each of them." in text(page)
    body = page.content.decode()
    assert '<a href="?days=30" class="button current" aria-current="page">30 days</a>' in body
    assert f'href="{EXPORT}?days=30"' in body
    assert ' style="' not in body  # the CSP refuses style attributes


def test_the_dashboards_periods(admin_client, spent) -> None:
    week = admin_client.get(DASHBOARD + "?days=7")
    assert table(week, "usage-by-user")[1:] == ["alice 2 6,000 200 6,200 0.01 EUR + 0.006 USD"]
    assert [row.split()[0] for row in table(week, "usage-by-group")[1:]] == ["blue", "red"]
    quarter = admin_client.get(DASHBOARD + "?days=90")
    assert table(quarter, "usage-by-group")[1:][-1] == "(no group) 1 0 100 100 0.0015 USD"
    assert "carol" in text(quarter)
    default = admin_client.get(DASHBOARD + "?days=oops")
    assert default.status_code == 200 and "Total, last 30 days" in text(default)


def test_the_csv_has_a_row_per_day_user_and_model(admin_client, spent, priced_model) -> None:
    response = admin_client.get(EXPORT + "?days=90")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    today = timezone.localdate()
    assert response["Content-Disposition"] == (
        f'attachment; filename="usage-90-days-to-{today:%Y-%m-%d}.csv"'
    )
    assert "no-store" in response["Cache-Control"]
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    day = lambda n: (today - dt.timedelta(days=n)).isoformat()  # noqa: E731
    assert rows == [
        ["day", "user", "model", "provider", "prompt_tokens", "completion_tokens",
         "total_tokens", "runs", "cost", "currency"],
        [day(40), "carol", "Scripted", "scripted", "0", "100", "100", "1", "0.001500", "USD"],
        [day(8), "bob", "Scripted", "scripted", "2000", "0", "2000", "1", "0.006000", "USD"],
        [day(2), "alice", "euro-large", "euro-cloud", "5000", "0", "5000", "1", "0.010000",
         "EUR"],
        [day(0), "alice", "Scripted", "scripted", "1000", "200", "1200", "1", "0.006000", "USD"],
    ]  # fmt: skip
    week = admin_client.get(EXPORT + "?days=7")
    assert len(list(csv.reader(io.StringIO(b"".join(week.streaming_content).decode())))) == 3


def test_the_csv_keeps_formulas_out_and_unpriced_costs_empty(
    admin_client, django_user_model, chat_model
) -> None:
    mallory = django_user_model.objects.create_user(username="@SUM(A1)", password="pw-m-12345")
    LLMModel.objects.filter(pk=chat_model.pk).update(display_name="=HYPERLINK(1)")
    spend(mallory, LLMModel.objects.get(pk=chat_model.pk), 10, 5)
    body = b"".join(admin_client.get(EXPORT).streaming_content).decode()
    [_header, row] = list(csv.reader(io.StringIO(body)))
    assert row[1:4] == ["'@SUM(A1)", "'=HYPERLINK(1)", "scripted"]
    assert row[-2:] == ["", ""]  # not priced: no cost, no currency


def test_the_dashboard_and_export_are_for_staff_only(client, user, spent) -> None:
    client.force_login(user)
    for url in (DASHBOARD, EXPORT):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))


def test_staff_need_the_view_permission(client, django_user_model, spent) -> None:
    clerk = django_user_model.objects.create_user("clerk", password="pw-clerk-123", is_staff=True)
    client.force_login(clerk)
    assert client.get(DASHBOARD).status_code == 403
    assert client.get(EXPORT).status_code == 403
    clerk.user_permissions.add(Permission.objects.get(codename="view_usagerecord"))
    clerk = django_user_model.objects.get(pk=clerk.pk)  # permissions are cached per object
    client.force_login(clerk)
    assert client.get(DASHBOARD).status_code == 200
    assert re.search(r"alice", b"".join(client.get(EXPORT).streaming_content).decode())
