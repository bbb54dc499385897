"""An admin adds a connection in one screen (base URL, key, a model ticked from the fetched
list), sees the result, and the model is at once in a user's model list in the chat."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from testing.scripted_server import ScriptedServer
from tests.e2e.conftest import _manage, log_in
from tests.llms.conftest import probe_rules

ADMIN = ("connie", "connie-e2e-pw-5521")
CONNECTION = "e2e-connection"
MODEL = "e2e-connected-model"
KEY = "sk-e2e-connection-0123456789"


@pytest.fixture(scope="module")
def admin_user(server_env: dict[str, str], app_server: str) -> tuple[str, str]:
    """A superuser of the app under test (created once, kept for the package's other tests)."""
    name, password = ADMIN
    code = (
        "from django.contrib.auth import get_user_model\n"
        "User = get_user_model()\n"
        f"if not User.objects.filter(username={name!r}).exists():\n"
        f"    User.objects.create_superuser({name!r}, password={password!r})\n"
    )
    _manage(server_env, "shell", "-c", code)
    return ADMIN


@pytest.fixture
def endpoint(server_env: dict[str, str]) -> Iterator[ScriptedServer]:
    """A second OpenAI-compatible endpoint that needs a key and answers the probe fully;
    the connection made to it is removed afterwards, so the other tests' model lists stay."""
    with ScriptedServer(api_key=KEY, model=MODEL) as server:
        server.set_rules(probe_rules())
        try:
            yield server
        finally:
            code = (
                "from llms.models import Provider\n"
                f"Provider.objects.filter(name={CONNECTION!r}).delete()"
            )
            _manage(server_env, "shell", "-c", code)


def test_an_admin_adds_a_connection_and_its_model_is_in_the_chat(
    new_context: Callable[..., BrowserContext],
    admin_user: tuple[str, str],
    endpoint: ScriptedServer,
    chat_page: Page,
    screenshot: Callable[..., object],
) -> None:
    context = new_context()
    page = context.new_page()
    try:
        log_in(page, *admin_user)
        page.goto("/admin/llms/provider/")
        page.get_by_role("link", name="Add a connection").click()
        expect(page.get_by_role("heading", name="Add a connection")).to_be_visible()
        page.get_by_role("textbox", name="Name").fill(CONNECTION)
        page.get_by_role("textbox", name="Base URL").fill(endpoint.base_url)
        page.get_by_label("API key").fill("not-the-key")
        page.get_by_role("button", name="Fetch models").click()
        # a refused key: said beside the key field, nothing to choose yet
        expect(page.locator("#id_api_key_error")).to_have_text(
            re.compile(r"The endpoint refused this API key \(HTTP 401\)")
        )
        expect(page.get_by_label(MODEL)).to_have_count(0)

        page.get_by_label("API key").fill(KEY)
        page.get_by_role("button", name="Fetch models").click()
        expect(page.get_by_role("heading", name="The endpoint lists 1 chat model")).to_be_visible()
        page.get_by_label(MODEL).check()
        page.get_by_role("button", name="Add the chosen models").click()

        expect(page.get_by_text(f"Connection {CONNECTION} added")).to_be_visible(timeout=60_000)
        row = page.get_by_role("row", name=re.compile(MODEL))
        expect(row).to_contain_text("added")
        expect(row).to_contain_text("7/7 checks passed")
        expect(row).to_contain_text("tool calls, forced tool choice, JSON mode, streaming, vision")
        assert KEY not in page.content()
        screenshot(page, docs="add-connection")
    finally:
        context.close()

    chat_page.goto("/")
    expect(chat_page.get_by_label("Model").locator("option", has_text=MODEL)).to_have_count(1)
