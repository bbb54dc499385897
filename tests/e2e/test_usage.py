"""Usage and cost as a user and an admin meet them (issue 46): real Chromium, real daphne,
the scripted LLM server.

A new user with a daily quota asks two questions of the default model, priced for this
test; their usage page (reached from the navigation) then shows the two runs' tokens
and cost per day and per model, what is left of the quota and when it resets, switches
to 7 days, fits a phone's width, and breaks no rule of the CSP. The admin's usage
dashboard shows the same user, and its CSV export has their row.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.conftest import MODEL, ScriptedLLM, _manage, log_in
from tests.e2e.test_chat_flows import Screenshot, latest_run, send, usage, wait_finished
from tests.e2e.test_csp import Violations, visit

pytestmark = pytest.mark.e2e

USER = ("dora", "dora-e2e-pw-6610")
ADMIN = ("usage-root", "usage-root-e2e-pw-3391")
QUOTA = 100_000

SETUP = f"""
from django.contrib.auth import get_user_model
from llms.models import UsageQuota

dora = get_user_model().objects.create_user({USER[0]!r}, password={USER[1]!r})
UsageQuota.objects.create(user=dora, daily_token_limit={QUOTA})
"""
# $3 per million prompt tokens, $15 per million completion tokens; then not priced again.
PRICES = """
from llms.models import LLMModel
LLMModel.objects.filter(model_id={model!r}).update(
    input_price={input}, output_price={output}, currency="USD"
)
"""


@pytest.fixture(scope="module")
def dora(app_server: str, server_env: dict[str, str]) -> tuple[str, str]:
    """A user of this module alone, so their usage is only what its test spends."""
    _manage(server_env, "shell", "-c", SETUP)
    return USER


@pytest.fixture
def priced(server_env: dict[str, str]) -> Iterator[None]:
    """The default model priced while the test runs (the other tests' runs stay unpriced)."""
    _manage(server_env, "shell", "-c", PRICES.format(model=MODEL, input='"3"', output='"15"'))
    try:
        yield
    finally:
        _manage(server_env, "shell", "-c", PRICES.format(model=MODEL, input=None, output=None))


@pytest.fixture(scope="module")
def usage_admin(app_server: str, server_env: dict[str, str]) -> tuple[str, str]:
    name, password = ADMIN
    env = server_env | {"DJANGO_SUPERUSER_PASSWORD": password}
    _manage(env, "createsuperuser", "--noinput", "--username", name, "--email", "u@e2e.test")
    return ADMIN


def titled_conversation(page: Page) -> int:
    """A conversation with a title of its own (made through the API with the browser's
    session): no title call follows its first answer, so only the two runs spend."""
    page.goto("/c/new/")
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        "/api/conversations", data={"title": "What it costs"}, headers={"X-CSRFToken": token}
    )
    assert response.status == 201, response.text()
    conversation_id = int(response.json()["id"])
    page.goto(f"/c/{conversation_id}/")
    page.wait_for_load_state("load")
    return conversation_id


def cells(page: Page, table_id: str) -> list[list[str]]:
    """The body rows of a table, cell by cell, as shown."""
    rows = page.locator(f"#{table_id} tbody tr")
    return [
        [cell.strip() for cell in rows.nth(i).locator("th, td").all_inner_texts()]
        for i in range(rows.count())
    ]


def test_the_usage_page_after_runs_and_the_admin_dashboard(
    new_context: Callable[[], BrowserContext],
    dora: tuple[str, str],
    usage_admin: tuple[str, str],
    priced: None,
    llm: ScriptedLLM,
    screenshot: Screenshot,
    artifacts: Path,
) -> None:
    llm.script(
        {"chunks": ["Forty-", "two."], "usage": usage(1000, 200)},  # 0.003 + 0.003
        {"chunks": ["Still ", "42."], "usage": usage(3000, 100)},  # 0.009 + 0.0015
    )
    context = new_context()
    page = context.new_page()
    violations = Violations(page)
    log_in(page, *dora)
    titled_conversation(page)
    for count, question in enumerate(("What is 6*7?", "Are you sure?"), start=1):
        send(page, question)
        expect(page.locator("#messages section.run")).to_have_count(count)
        run_id = latest_run(page)
        wait_finished(page, run_id)
        expect(page.locator(f"#footer-{run_id} .tokens")).to_be_visible()
    assert len(llm.requests()) == 2

    page.get_by_role("link", name="Usage", exact=True).click()
    expect(page.get_by_role("heading", name="Usage", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name="30 days")).to_have_attribute("aria-current", "page")
    expect(page.locator("#quota-left")).to_have_text(
        "95,700 of your 100,000 tokens left today (4,300 used)."
    )
    expect(page.locator("#quota-reset")).to_contain_text("Your quota resets at 00:00 UTC, in ")
    summary = page.locator("#usage-total")
    expect(summary.locator("dt")).to_have_text(["Tokens", "Runs", "Cost"])
    expect(summary.locator("dd")).to_have_text(["4,300", "2", "0.0165 USD"])
    [today] = cells(page, "usage-by-day")
    assert today[1:] == ["2", "4,000", "300", "4,300", "0.0165 USD"]
    assert cells(page, "usage-by-model") == [[MODEL, "2", "4,000", "300", "4,300", "0.0165 USD"]]
    expect(page.get_by_role("table", name="Per model")).to_be_visible()
    violations.assert_none("the usage page")
    page.screenshot(path=str(artifacts / "usage_page_desktop.png"), full_page=True)

    page.get_by_role("link", name="7 days").click()
    expect(page.get_by_role("link", name="7 days")).to_have_attribute("aria-current", "page")
    expect(page.get_by_role("heading", name="Last 7 days")).to_be_visible()
    assert cells(page, "usage-by-model")[0][-1] == "0.0165 USD"

    # On a phone the page keeps to the screen's width; the tables scroll in their region.
    page.set_viewport_size({"width": 375, "height": 800})
    page.reload()
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page is {overflow}px wider than a phone's screen"
    region = page.get_by_role("region", name="Per model")
    expect(region).to_be_visible()
    assert region.evaluate("(el) => el.scrollWidth > el.clientWidth")  # scrolls, not overflows
    violations.assert_none("the usage page on a phone")
    screenshot(page)
    context.close()

    # The admin's dashboard: dora among the users, her row in the CSV.
    context = new_context()
    admin = context.new_page()
    watched = Violations(admin)
    log_in(admin, *usage_admin)
    visit(admin, watched, "/admin/llms/usagerecord/")
    admin.get_by_role("link", name="Usage dashboard").click()
    expect(admin.get_by_role("heading", name="Usage dashboard")).to_be_visible()
    row = admin.locator("#usage-by-user tbody tr").filter(has_text="dora")
    expect(row).to_have_count(1)
    assert [c.strip() for c in row.locator("th, td").all_inner_texts()] == [
        "dora", "2", "4,000", "300", "4,300", "0.0165 USD"
    ]  # fmt: skip
    watched.assert_none("the usage dashboard")
    admin.screenshot(path=str(artifacts / "usage_dashboard.png"), full_page=True)
    export = admin.get_by_role("link", name="Export CSV (30 days)")
    response = admin.request.get(export.get_attribute("href") or "")
    assert response.status == 200 and response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text())))
    [mine] = [r for r in rows if r["user"] == "dora"]
    assert (mine["model"], mine["total_tokens"], mine["runs"], mine["cost"]) == (
        MODEL,
        "4300",
        "2",
        "0.016500",
    )
    context.close()
