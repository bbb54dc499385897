"""Repeated wrong passwords lock the account out from that address: the real login form
in Chromium against daphne, then an administrator's unlock from the command line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.conftest import _manage, log_in

pytestmark = pytest.mark.e2e

USERNAME = "carol"  # her own account: locking alice or bob out would fail the other tests
PASSWORD = "carol-e2e-pw-5150"
CREATE = (
    "from django.contrib.auth import get_user_model; "
    f"get_user_model().objects.create_user({USERNAME!r}, password={PASSWORD!r})"
)


@pytest.fixture
def carol(server_env: dict[str, str], app_server: str) -> str:
    _manage(server_env, "shell", "-c", CREATE)
    return USERNAME


def submit(page: Page, password: str) -> None:
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


def test_wrong_passwords_then_the_right_one_is_refused_with_a_message(
    new_context: Callable[[], BrowserContext],
    server_env: dict[str, str],
    carol: str,
    screenshot: Callable[..., Path],
) -> None:
    page = new_context().new_page()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        submit(page, "not-the-password")
        expect(page.locator(".error")).to_contain_text("didn't match")
    submit(page, "not-the-password")
    expect(page.get_by_role("heading", name="Too many failed logins")).to_be_visible()

    submit(page, PASSWORD)

    expect(page.get_by_role("heading", name="Too many failed logins")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("Try again in 15 minutes")
    expect(page.locator(".who")).to_have_count(0)
    screenshot(page)

    _manage(server_env, "axes_reset_username", USERNAME)  # an administrator unlocks
    log_in(page, USERNAME, PASSWORD)
    page.context.close()
