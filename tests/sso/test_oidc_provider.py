"""The test OIDC provider (testing/oidc_provider) against its real process, over HTTP as a
relying party and a browser would use it: if these pass, a failure in the app's sign-in
tests is the app's."""

from __future__ import annotations

import contextlib
import html
import json
import re
import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest
from jwcrypto import jwk, jws, jwt

from tests.sso.oidc import OIDCProvider, running_oidc_provider

pytestmark = pytest.mark.integration

CLIENT_ID = "agentsite-test"
CLIENT_SECRET = "client-secret-for-tests"
# Never fetched: the scripted browser reads the code from the redirect's Location.
CALLBACK = "http://127.0.0.1:9/oidc/callback/"
AFTER_LOGOUT = "http://127.0.0.1:9/signed-out/"
SCOPE = "openid email profile groups"


class LoginRefused(Exception):
    """The provider's login form came back instead of a redirect."""


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OIDCProvider]:
    with running_oidc_provider(tmp_path_factory.mktemp("oidc")) as idp:
        idp.register_client(
            CLIENT_ID,
            CLIENT_SECRET,
            redirect_uris=[CALLBACK],
            post_logout_redirect_uris=[AFTER_LOGOUT],
        )
        yield idp


@pytest.fixture
def idp(provider: OIDCProvider) -> Iterator[OIDCProvider]:
    """The module's provider, issuing normal ID tokens again after each test."""
    yield provider
    provider.misbehave(id_token="normal")


def new_username() -> str:
    return f"user-{secrets.token_hex(4)}"


def absolute(response: httpx.Response) -> str:
    return urljoin(str(response.url), response.headers["location"])


def authorize(
    browser: httpx.Client, idp: OIDCProvider, username: str, password: str, nonce: str
) -> str:
    """Sign in at the provider's form (with its CSRF token) on the way to /authorize, as a
    browser does; the authorization code from the redirect to CALLBACK."""
    state = secrets.token_urlsafe(8)
    params = {
        "response_type": "code",
        "client_id": CLIENT_ID,
        "redirect_uri": CALLBACK,
        "scope": SCOPE,
        "state": state,
        "nonce": nonce,
    }
    response = browser.get(idp.discovery()["authorization_endpoint"], params=params)
    if response.headers.get("location", "").startswith(CALLBACK):  # already signed in
        return code_from(response, state)
    assert response.status_code == 302, response.text
    login_page = browser.get(absolute(response))
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page.text)
    nxt = re.search(r'name="next" value="([^"]+)"', login_page.text)
    assert csrf and nxt, login_page.text
    form = {
        "csrfmiddlewaretoken": csrf[1],
        "next": html.unescape(nxt[1]),
        "username": username,
        "password": password,
    }
    signed_in = browser.post(str(login_page.url), data=form)
    if signed_in.status_code == 200:
        raise LoginRefused(username)
    assert signed_in.status_code == 302, signed_in.text
    return code_from(browser.get(absolute(signed_in)), state)


def code_from(response: httpx.Response, state: str) -> str:
    assert response.status_code == 302, response.text
    location = response.headers["location"]
    assert location.startswith(CALLBACK), location
    query = parse_qs(urlsplit(location).query)
    assert query["state"] == [state]
    return query["code"][0]


def token_request(idp: OIDCProvider, **grant: str) -> httpx.Response:
    data = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, **grant}
    return httpx.post(idp.discovery()["token_endpoint"], data=data, timeout=10)


def sign_in(
    idp: OIDCProvider, username: str, password: str, browser: httpx.Client | None = None
) -> tuple[dict[str, Any], str]:
    """The whole authorization-code flow: the token response, and the nonce sent."""
    nonce = secrets.token_urlsafe(8)
    with contextlib.ExitStack() as stack:
        client = browser or stack.enter_context(httpx.Client(timeout=10))
        code = authorize(client, idp, username, password, nonce)
    response = token_request(idp, grant_type="authorization_code", code=code, redirect_uri=CALLBACK)
    assert response.status_code == 200, response.text
    return response.json(), nonce


def jwks(idp: OIDCProvider) -> jwk.JWKSet:
    return jwk.JWKSet.from_json(httpx.get(idp.discovery()["jwks_uri"], timeout=10).text)


def verified_claims(idp: OIDCProvider, id_token: str) -> dict[str, Any]:
    """What a relying party accepts: RS256 over the JWKS, iss, aud and exp checked."""
    check_claims = {"iss": idp.issuer, "aud": CLIENT_ID, "exp": None}
    signed = jws.JWS()
    signed.deserialize(id_token)
    key = jwks(idp).get_key(signed.jose_header["kid"])  # the key it names, as an RP picks it
    token = jwt.JWT(jwt=id_token, key=key, algs=["RS256"], check_claims=check_claims)
    return json.loads(token.claims)


def userinfo(idp: OIDCProvider, access_token: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {access_token}"}
    return httpx.get(idp.discovery()["userinfo_endpoint"], headers=headers, timeout=10)


def test_discovery_lists_the_endpoints_at_the_issuer(idp: OIDCProvider) -> None:
    config = idp.discovery()
    assert config["issuer"] == idp.issuer
    for endpoint in ("authorization", "token", "userinfo", "end_session"):
        assert config[f"{endpoint}_endpoint"].startswith(f"{idp.issuer}/")
    assert config["jwks_uri"].startswith(f"{idp.issuer}/")
    assert "RS256" in config["id_token_signing_alg_values_supported"]
    assert {"openid", "email", "profile", "groups"} <= set(config["scopes_supported"])
    assert {"sub", "email", "email_verified", "preferred_username", "name", "groups"} <= set(
        config["claims_supported"]
    )
    assert httpx.get(f"{idp.discovery_url}/", timeout=10).json() == config
    assert [key["alg"] for key in json.loads(jwks(idp).export(private_keys=False))["keys"]] == [
        "RS256"
    ]


def test_code_flow_gives_a_signed_id_token_with_the_claims(idp: OIDCProvider) -> None:
    username = new_username()
    sub = idp.add_user(
        username, "pw-1", name="Ada Lovelace", email="ada@example.test", groups=["staff", "ops"]
    )

    tokens, nonce = sign_in(idp, username, "pw-1")

    assert tokens["refresh_token"]
    signed = jws.JWS()
    signed.deserialize(tokens["id_token"])
    assert signed.jose_header["alg"] == "RS256"
    assert jwks(idp).get_key(signed.jose_header["kid"]) is not None
    claims = verified_claims(idp, tokens["id_token"])
    expected = {
        "sub": sub,
        "email": "ada@example.test",
        "email_verified": True,
        "preferred_username": username,
        "name": "Ada Lovelace",
        "groups": ["ops", "staff"],
    }
    assert {key: claims[key] for key in expected} == expected
    assert claims["nonce"] == nonce
    answer = userinfo(idp, tokens["access_token"])
    assert answer.status_code == 200, answer.text
    assert {key: answer.json()[key] for key in expected} == expected


def test_group_changes_show_at_the_next_sign_in(idp: OIDCProvider) -> None:
    username = new_username()
    idp.add_user(username, "pw-2", groups=["staff"])
    first, _ = sign_in(idp, username, "pw-2")

    idp.update_user(username, groups=["admins"], email_verified=False)
    second, _ = sign_in(idp, username, "pw-2")

    assert verified_claims(idp, first["id_token"])["groups"] == ["staff"]
    claims = verified_claims(idp, second["id_token"])
    assert claims["groups"] == ["admins"]
    assert claims["email_verified"] is False


def test_a_disabled_user_cannot_sign_in_nor_refresh(idp: OIDCProvider) -> None:
    username = new_username()
    idp.add_user(username, "pw-3")
    tokens, _ = sign_in(idp, username, "pw-3")
    refreshed = token_request(
        idp, grant_type="refresh_token", refresh_token=tokens["refresh_token"]
    )
    assert refreshed.status_code == 200, refreshed.text
    tokens = refreshed.json()
    assert verified_claims(idp, tokens["id_token"])["preferred_username"] == username

    idp.update_user(username, active=False)

    refused = token_request(idp, grant_type="refresh_token", refresh_token=tokens["refresh_token"])
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_grant"
    assert userinfo(idp, tokens["access_token"]).status_code == 401
    with pytest.raises(LoginRefused):
        sign_in(idp, username, "pw-3")


def test_rp_initiated_logout_with_an_id_token_hint_asks_nothing(idp: OIDCProvider) -> None:
    username = new_username()
    idp.add_user(username, "pw-4")
    with httpx.Client(timeout=10) as browser:
        tokens, _ = sign_in(idp, username, "pw-4", browser)
        logout = browser.get(
            idp.discovery()["end_session_endpoint"],
            params={
                "id_token_hint": tokens["id_token"],
                "post_logout_redirect_uri": AFTER_LOGOUT,
                "state": "s1",
            },
        )
        assert logout.status_code == 302, logout.text
        assert logout.headers["location"] == f"{AFTER_LOGOUT}?state=s1"
        assert "Not signed in" in browser.get(idp.url).text


def test_logout_without_a_hint_shows_a_confirmation_page(idp: OIDCProvider) -> None:
    username = new_username()
    idp.add_user(username, "pw-5")
    with httpx.Client(timeout=10) as browser:
        sign_in(idp, username, "pw-5", browser)
        params = {"client_id": CLIENT_ID, "post_logout_redirect_uri": AFTER_LOGOUT}
        page = browser.get(idp.discovery()["end_session_endpoint"], params=params)
        assert page.status_code == 200
        assert 'name="allow" value="Logout"' in page.text


@pytest.mark.parametrize(
    ("mode", "refusal"),
    [
        ("tamper", jws.InvalidJWSSignature),
        ("expired", jwt.JWTExpired),
        ("wrong_audience", jwt.JWTInvalidClaimValue),
    ],
)
def test_misbehaving_id_tokens_are_refused_by_a_relying_party(
    idp: OIDCProvider, mode: str, refusal: type[Exception]
) -> None:
    username = new_username()
    sub = idp.add_user(username, "pw-6")
    idp.misbehave(id_token=mode)

    tokens, _ = sign_in(idp, username, "pw-6")

    with pytest.raises(refusal):
        verified_claims(idp, tokens["id_token"])
    payload = jws.JWS()
    payload.deserialize(tokens["id_token"])
    if mode == "tamper":
        unverified = json.loads(payload.objects["payload"])
        assert unverified["sub"] == f"tampered-{sub}"
    else:  # the signature itself is good: only the claims are wrong
        payload.verify(jwks(idp).get_key(payload.jose_header["kid"]))
        claims = json.loads(payload.payload)
        assert claims["sub"] == sub


def test_control_needs_the_token(idp: OIDCProvider) -> None:
    response = httpx.post(f"{idp.url}/_control/misbehave", json={"id_token": "tamper"}, timeout=10)
    assert response.status_code == 403
    wrong = httpx.post(
        f"{idp.url}/_control/misbehave",
        json={"id_token": "tamper"},
        headers={"X-Control-Token": "guess"},
        timeout=10,
    )
    assert wrong.status_code == 403
