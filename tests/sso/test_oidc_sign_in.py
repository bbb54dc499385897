"""Signing in through a real OpenID Connect provider in Chromium, as a team would (issue 44).

The provider is django-oauth-toolkit in OIDC mode in a process of its own
(:mod:`testing.oidc_provider`); the site runs as ``make run`` serves it (daphne, embedded
mode) with only ``AGENTSITE_OIDC_*`` set: its endpoints come from discovery.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.integration.stack import Stack, running_stack
from tests.sso.oidc import OIDCProvider, running_oidc_provider

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

CLIENT_ID = "agentsite"
CLIENT_SECRET = "client-secret-for-tests-7d1f"
PASSWORD = "carol-idp-password-5521"
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OIDCProvider, Stack]]:
    work = tmp_path_factory.mktemp("oidc")
    with running_oidc_provider(work / "idp") as idp:
        env = {
            "AGENTSITE_OIDC_ISSUER": idp.issuer,
            "AGENTSITE_OIDC_CLIENT_ID": CLIENT_ID,
            "AGENTSITE_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "AGENTSITE_OIDC_SCOPES": "openid email profile groups",
            "AGENTSITE_OIDC_NAME": "Example SSO",
            "AGENTSITE_SSO_RECHECK_MINUTES": "0",  # ask the provider at every request
        }
        (work / "site").mkdir()
        with running_stack(mode="embedded", work=work / "site", extra_env=env) as stack:
            idp.register_client(
                CLIENT_ID,
                CLIENT_SECRET,
                redirect_uris=[f"{stack.base_url}/oidc/callback/"],
                post_logout_redirect_uris=[f"{stack.base_url}/accounts/login/"],
            )
            yield idp, stack


@pytest.fixture
def page(site) -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            context = browser.new_context()
            context.set_default_timeout(TIMEOUT_MS)
            yield context.new_page()
        finally:
            browser.close()


@pytest.fixture(autouse=True)
def behaving(site) -> Iterator[None]:
    yield
    site[0].misbehave(id_token="normal")


def sign_in(page: Page, stack: Stack, username: str, *, at_provider: bool = True) -> None:
    """From the site's login page through the provider's form (unless the provider still
    has a session), back to the site."""
    page.goto(f"{stack.base_url}/accounts/login/")
    page.get_by_role("link", name="Sign in with Example SSO").click()
    if at_provider:
        page.locator("#id_username").fill(username)
        page.locator("#id_password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{stack.base_url}/**")


def groups(stack: Stack, username: str) -> set[str]:
    rows = stack.query(
        "SELECT g.name FROM auth_group g JOIN auth_user_groups ug ON ug.group_id = g.id "
        "JOIN auth_user u ON u.id = ug.user_id WHERE u.username = ?",
        username,
    )
    return {name for (name,) in rows}


def test_sign_in_creates_the_user_and_keeps_groups_in_step_and_logout_ends_both(
    site, page: Page
) -> None:
    idp, stack = site
    idp.add_user("carol", PASSWORD, email="carol@example.org", groups=["engineers", "ops"])

    sign_in(page, stack, "carol")
    assert urlsplit(page.url).path == "/"  # the chat, signed in
    expect(page.locator("body")).to_contain_text("carol")
    assert groups(stack, "carol") == {"engineers", "ops"}
    assert stack.query("SELECT email FROM auth_user WHERE username = 'carol'") == [
        ("carol@example.org",)
    ]

    idp.update_user("carol", groups=["engineers", "research"])
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(f"{stack.base_url}/accounts/login/**")  # back from the provider's logout

    # Logged out at the provider too: its form asks for the password again.
    sign_in(page, stack, "carol")
    assert urlsplit(page.url).path == "/"
    assert groups(stack, "carol") == {"engineers", "research"}
    assert stack.query("SELECT count(*) FROM auth_user WHERE username LIKE 'carol%'") == [(1,)]


@pytest.mark.parametrize("bad", ["tamper", "expired", "wrong_audience"])
def test_a_tampered_expired_or_foreign_id_token_is_refused(site, page: Page, bad: str) -> None:
    idp, stack = site
    username = f"dave-{bad}".replace("_", "-")
    idp.add_user(username, PASSWORD, groups=["engineers"])
    idp.misbehave(id_token=bad)

    sign_in(page, stack, username)
    assert urlsplit(page.url).path == "/accounts/login/"
    expect(page.get_by_role("alert")).to_contain_text("did not work")
    assert stack.query("SELECT count(*) FROM auth_user WHERE username = ?", username) == [(0,)]
    refused = stack.query(
        "SELECT count(*) FROM audit_auditevent WHERE action = 'sso.login_failed'"
    )[0][0]
    assert refused >= 1


def test_a_user_disabled_at_the_provider_loses_the_site_and_their_tokens(site, page: Page) -> None:
    idp, stack = site
    idp.add_user("erin", PASSWORD, groups=["engineers"])
    sign_in(page, stack, "erin")
    assert urlsplit(page.url).path == "/"
    token = create_token(page, stack)
    api = f"{stack.base_url}/api/conversations"
    bearer = {"Authorization": f"Bearer {token}"}
    assert httpx.get(api, headers=bearer).status_code == 200

    idp.update_user("erin", active=False)
    page.goto(f"{stack.base_url}/")  # the browser's next page: the provider is asked
    assert urlsplit(page.url).path == "/accounts/login/"
    expect(page.get_by_role("alert")).to_contain_text("disabled")
    refused = httpx.get(api, headers=bearer)
    assert refused.status_code == 401, refused.text
    assert stack.query("SELECT is_active FROM auth_user WHERE username = 'erin'") == [(0,)]

    # Enabled again at the provider: the next sign-in lets erin back in.
    idp.update_user("erin", active=True)
    page.context.clear_cookies()
    sign_in(page, stack, "erin")
    assert urlsplit(page.url).path == "/"


def create_token(page: Page, stack: Stack) -> str:
    """A personal API token, made on the settings page as a user would."""
    page.goto(f"{stack.base_url}/settings/tokens/")
    page.get_by_label("Name").fill("script")
    page.get_by_role("button", name="Create token").click()
    token = page.get_by_label("New API token").input_value()
    assert token.startswith("as_"), token
    return token


def test_sso_only_and_an_unreachable_provider_are_said_on_the_login_page(
    tmp_path: Path, page: Page
) -> None:
    env = {
        "AGENTSITE_OIDC_ISSUER": "http://127.0.0.1:9/o",  # nothing listens on port 9
        "AGENTSITE_OIDC_CLIENT_ID": CLIENT_ID,
        "AGENTSITE_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "AGENTSITE_OIDC_NAME": "Example SSO",
        "AGENTSITE_SSO_ONLY": "true",
    }
    with running_stack(mode="embedded", work=tmp_path, extra_env=env) as stack:
        page.goto(f"{stack.base_url}/accounts/login/")
        expect(page.locator("#id_password")).to_have_count(0)  # SSO only: no password form
        page.get_by_role("link", name="Sign in with Example SSO").click()
        assert urlsplit(page.url).path == "/accounts/login/"
        expect(page.get_by_role("alert")).to_contain_text("cannot be reached")
