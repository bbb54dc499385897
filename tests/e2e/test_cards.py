"""Issue 47, errors and cards, in a real browser: the approval card of an admin-defined
HTTP endpoint shows the concrete request (method, the URL with the arguments filled in,
the body, the credentials by name or "No credentials") with distinct Approve and Deny;
a denied call shows as denied, live and after a reload; staff see why an answer failed
(alice does not); Retry shows on a server error, not on a refused API key."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.conftest import ScriptedLLM, _manage, signed_in_page
from tests.e2e.test_chat_flows import latest_run, new_conversation, send

pytestmark = pytest.mark.e2e

STAFF = ("grace", "grace-e2e-pw-5521")
STAFF_SCRIPT = """
from django.contrib.auth import get_user_model
User = get_user_model()
if not User.objects.filter(username={name!r}).exists():
    User.objects.create_user({name!r}, password={password!r}, is_staff=True)
"""
ENDPOINTS = [
    {
        "name": "create_order",
        "description": "Order an item for a customer",
        "method": "POST",
        "url_template": "https://shop.example/customers/{customer}/orders",
        "parameters": {
            "type": "object",
            "properties": {"customer": {"type": "string"}, "item": {"type": "string"}},
            "required": ["customer", "item"],
        },
    },
    {
        "name": "cancel_order",
        "description": "Cancel an order",
        "method": "DELETE",
        "url_template": "https://shop.example/orders/{order_id}",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
]
# Only create_order has a secret header: cancel_order sends no credentials.
SECRETS = {"create_order": {"Authorization": "Bearer shop-s3cr3t"}}
HTTP_TOOL = """
from tools.models import ToolConfig
from tools.services import toolconfig_sync, toolconfig_update
toolconfig_sync()
tool = ToolConfig.objects.get(name="http_request")
toolconfig_update(toolconfig=tool, enabled={on}, config={config!r}, secrets={secrets!r})
"""


@pytest.fixture
def shop_endpoints(server_env: dict[str, str]) -> Iterator[None]:
    """The admin defined two shop endpoints (for this test only)."""
    config = {"endpoints": ENDPOINTS, "allow_origins": ["https://shop.example"]}
    secrets = {"secret_headers": json.dumps(SECRETS)}
    _manage(server_env, "shell", "-c", HTTP_TOOL.format(on=True, config=config, secrets=secrets))
    try:
        yield
    finally:
        empty = {"endpoints": [], "allow_origins": []}
        off = HTTP_TOOL.format(on=False, config=empty, secrets={"secret_headers": ""})
        _manage(server_env, "shell", "-c", off)


@pytest.fixture(scope="module")
def staff_page(
    new_context: Callable[..., BrowserContext], server_env: dict[str, str]
) -> Iterator[Page]:
    name, password = STAFF
    _manage(server_env, "shell", "-c", STAFF_SCRIPT.format(name=name, password=password))
    with signed_in_page(new_context, name, password) as page:
        yield page


def test_the_approval_card_shows_the_concrete_request_and_a_denied_call_shows_as_denied(
    chat_page: Page, llm: ScriptedLLM, shop_endpoints: None, screenshot: Callable[..., Path]
) -> None:
    llm.script(
        {"tool_calls": [{"name": "create_order",
                         "arguments": {"customer": "ada lovelace", "item": "tea"}}]},
        {"tool_calls": [{"name": "cancel_order", "arguments": {"order_id": "A-17"}}]},
        "I did not order or cancel anything.",
    )  # fmt: skip
    new_conversation(chat_page)
    send(chat_page, "Order tea for Ada, then cancel order A-17.")
    run_id = latest_run(chat_page)
    steps = chat_page.locator(f"#steps-{run_id}")
    card = steps.locator(".approval").first

    # The real request, not the URL template; the credentials by name, never their value.
    expect(card).to_contain_text("create_order needs your approval")
    expect(card.locator(".approval-url")).to_have_text(
        "POST https://shop.example/customers/ada%20lovelace/orders"
    )
    expect(card.locator(".approval-body")).to_contain_text('"item": "tea"')
    expect(card.locator(".approval-credentials")).to_contain_text("Authorization")
    expect(card).not_to_contain_text("shop-s3cr3t")
    expect(card).not_to_contain_text("{customer}")
    approve = card.get_by_role("button", name="Approve")
    deny = card.get_by_role("button", name="Deny")
    expect(approve).to_have_class(re.compile(r"\bprimary\b"))
    expect(deny).to_have_class(re.compile(r"\bdanger\b"))
    look = "el => [getComputedStyle(el).backgroundColor, getComputedStyle(el).color].join()"
    assert approve.evaluate(look) != deny.evaluate(look)  # they do not look the same
    # The call's own card waits with it: it is not running yet.
    waiting = steps.locator(".tool-card").first
    expect(waiting.locator(".status")).to_have_text("waiting for approval")
    expect(waiting).to_have_class(re.compile(r"\bwaiting\b"))
    chat_page.reload()  # and says so after a reload
    expect(waiting.locator(".status")).to_have_text("waiting for approval")
    card.scroll_into_view_if_needed()
    screenshot(chat_page, docs="approval")

    deny.click()

    expect(card).to_contain_text("Denied")
    denied = steps.locator(".tool-card").first
    expect(denied).to_have_class(re.compile(r"\bdenied\b"))
    expect(denied.locator(".status")).to_contain_text("denied")
    expect(denied.locator(".status")).not_to_contain_text("failed")

    # The second endpoint has no secret header: the card says so, and nothing about the
    # administrator's credentials.
    second = steps.locator(".approval").nth(1)
    expect(second.locator(".approval-url")).to_have_text("DELETE https://shop.example/orders/A-17")
    expect(second.locator(".approval-credentials")).to_have_text("No credentials")
    expect(second).not_to_contain_text("administrator's")
    second.get_by_role("button", name="Deny").click()
    expect(chat_page.locator(f"#answer-{run_id}")).to_contain_text("I did not order")

    chat_page.reload()
    expect(steps.locator(".tool-card.denied")).to_have_count(2)
    expect(steps.locator(".tool-card.failed")).to_have_count(0)
    expect(steps.locator(".tool-card").first.locator(".status")).to_contain_text("denied")


def _fail_with(page: Page, llm: ScriptedLLM, status: int) -> int:
    """A question whose every model request answers ``status``; the run's id."""
    llm.script(default={"status": status})
    new_conversation(page)
    send(page, f"This will fail with {status}.")
    run_id = latest_run(page)
    expect(page.locator(f"#status-{run_id}")).to_have_class(
        re.compile(r"\bfailed\b"), timeout=30_000
    )
    return run_id


def test_staff_see_why_an_answer_failed_and_retry_is_offered_on_a_server_error(
    staff_page: Page, llm: ScriptedLLM, screenshot: Callable[..., Path]
) -> None:
    run_id = _fail_with(staff_page, llm, 500)
    status = staff_page.locator(f"#status-{run_id}")

    expect(status).to_contain_text("answered with an error of its own")
    details = status.locator("details.error-detail")
    expect(details.locator("summary")).to_have_text("Details for staff")
    details.locator("summary").click()
    expect(details).to_contain_text("HTTP 500")
    expect(details).to_contain_text("POST http")  # which request
    expect(status.get_by_role("button", name="Retry")).to_be_visible()
    screenshot(staff_page)

    staff_page.reload()
    expect(status.locator("details.error-detail")).to_contain_text("HTTP 500")
    expect(status.get_by_role("button", name="Retry")).to_be_visible()


def test_a_refused_api_key_offers_no_retry_and_staff_see_the_provider_message(
    staff_page: Page, llm: ScriptedLLM
) -> None:
    run_id = _fail_with(staff_page, llm, 401)
    status = staff_page.locator(f"#status-{run_id}")

    expect(status).to_contain_text("refused its API key")
    expect(status.locator("details.error-detail")).to_contain_text("HTTP 401")
    expect(status.get_by_role("button", name="Retry")).to_have_count(0)
    staff_page.reload()
    expect(status).to_contain_text("refused its API key")
    expect(status.get_by_role("button", name="Retry")).to_have_count(0)


def test_alice_is_told_in_plain_words_without_the_details(
    chat_page: Page, llm: ScriptedLLM
) -> None:
    run_id = _fail_with(chat_page, llm, 500)
    status = chat_page.locator(f"#status-{run_id}")

    expect(status).to_contain_text("answered with an error of its own")
    expect(status.get_by_role("button", name="Retry")).to_be_visible()
    assert "Details for staff" not in status.inner_html()
    assert "HTTP 500" not in chat_page.content()
    chat_page.reload()
    expect(status).to_contain_text("answered with an error of its own")
    assert "Details for staff" not in chat_page.content()
    assert "HTTP 500" not in chat_page.content()
