"""The login page with single sign-on configured: the provider's button, SSO only, the
settings checks (issue 44). The sign-in itself is tested against real providers in
test_oidc_sign_in.py (OIDC) and test_ldap_sign_in.py (LDAP)."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks

pytestmark = pytest.mark.django_db


@pytest.fixture
def oidc(settings):
    settings.AGENTSITE_OIDC_ISSUER = "https://idp.example.org/realms/team"
    settings.OIDC_RP_CLIENT_ID = "agentsite"
    settings.OIDC_RP_CLIENT_SECRET = "secret"
    settings.AGENTSITE_OIDC_NAME = "Example SSO"
    return settings


def test_without_sso_the_page_is_the_password_form_only(client) -> None:
    page = client.get("/accounts/login/").content.decode()
    assert 'name="password"' in page
    assert "Sign in with" not in page


def test_with_oidc_the_page_offers_the_provider_and_the_password_form(oidc, client) -> None:
    page = client.get("/accounts/login/?next=/c/5/").content.decode()
    assert 'href="/oidc/authenticate/?next=/c/5/"' in page
    assert "Sign in with Example SSO" in page
    assert 'name="password"' in page


def test_sso_only_hides_the_password_form_and_refuses_a_password(oidc, client, user) -> None:
    oidc.AGENTSITE_SSO_ONLY = True
    page = client.get("/accounts/login/").content.decode()
    assert 'name="password"' not in page
    refused = client.post("/accounts/login/", {"username": "alice", "password": "pw-alice-123"})
    assert refused.status_code == 403
    assert "Sign in through Example SSO." in refused.content.decode()
    assert "_auth_user_id" not in client.session


@pytest.mark.parametrize(
    ("reason", "words"),
    [("failed", "did not work"), ("unreachable", "cannot be reached"), ("disabled", "disabled")],
)
def test_the_page_says_why_signing_in_through_the_provider_stopped(
    oidc, client, reason: str, words: str
) -> None:
    assert words in client.get(f"/accounts/login/?sso={reason}").content.decode()


def test_a_half_configured_provider_is_a_check_error(settings) -> None:
    settings.AGENTSITE_OIDC_ISSUER = "https://idp.example.org"
    settings.OIDC_RP_CLIENT_SECRET = ""
    settings.OIDC_RP_CLIENT_ID = "agentsite"
    errors = {message.id: message.msg for message in run_checks()}
    assert "AGENTSITE_OIDC_CLIENT_SECRET" in errors["agentsite.E010"]


def test_logout_of_a_password_session_stays_on_the_site(oidc, user_client) -> None:
    response = user_client.post("/accounts/logout/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/"
