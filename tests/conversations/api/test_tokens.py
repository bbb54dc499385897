"""API tokens: hashed at rest, shown once, last use recorded, revocable; page and command."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from conversations.api import token_pages
from conversations.http.tokens import (
    TOKEN_PREFIX,
    token_authenticate,
    token_create,
    token_hash,
    token_revoke,
)
from conversations.models import APIToken

pytestmark = pytest.mark.django_db


def row_values(token: APIToken) -> list[str]:
    return [str(getattr(token, f.attname)) for f in APIToken._meta.concrete_fields]


def test_token_is_random_prefixed_and_stored_hashed(user):
    token, raw = token_create(user=user, name="ci")
    other, raw2 = token_create(user=user, name="ci")

    assert raw.startswith(TOKEN_PREFIX) and len(raw) >= 40 and raw != raw2
    token.refresh_from_db()
    assert token.token_hash == token_hash(raw) and len(token.token_hash) == 64
    assert token.prefix == raw[:8]
    assert not any(raw in value for value in row_values(token))  # plaintext nowhere at rest
    assert token.name == "ci" and token.last_used_at is None and token.is_active


def test_authenticate_accepts_only_the_exact_live_token(user):
    token, raw = token_create(user=user, name="x")

    assert token_authenticate(raw) == user
    assert token_authenticate(raw + "x") is None
    assert token_authenticate(raw[:-1]) is None
    assert token_authenticate("") is None and token_authenticate(None) is None
    assert token_authenticate(token.token_hash) is None  # the stored hash is not a credential

    token_revoke(token=token)
    assert token_authenticate(raw) is None
    first_revocation = APIToken.objects.get(pk=token.pk).revoked_at
    token_revoke(token=token)
    assert APIToken.objects.get(pk=token.pk).revoked_at == first_revocation


def test_inactive_user_tokens_stop_working(user):
    _, raw = token_create(user=user, name="x")
    user.is_active = False
    user.save()
    assert token_authenticate(raw) is None


def test_last_used_is_recorded_at_most_once_a_minute(user):
    token, raw = token_create(user=user, name="x")

    token_authenticate(raw)
    first = APIToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    token_authenticate(raw)
    assert APIToken.objects.get(pk=token.pk).last_used_at == first  # no write per request

    stale = timezone.now() - timedelta(minutes=5)
    APIToken.objects.filter(pk=token.pk).update(last_used_at=stale)
    token_authenticate(raw)
    assert APIToken.objects.get(pk=token.pk).last_used_at > stale


def test_api_request_records_last_use(api, user):
    assert api.get("/api/models").status_code == 200
    assert APIToken.objects.get(user=user).last_used_at is not None


def test_name_too_long_is_refused(user):
    from core.errors import ApplicationError

    with pytest.raises(ApplicationError) as exc:
        token_create(user=user, name="n" * 101)
    assert "name" in exc.value.extra
    assert not APIToken.objects.exists()


# ------------------------------------------------------------------ settings page


def test_tokens_page_needs_login(client):
    response = client.get("/settings/tokens/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_create_shows_token_once_then_only_prefix(user_client, user):
    created = user_client.post("/settings/tokens/", {"name": "laptop"})
    assert created.status_code == 302  # POST-redirect-GET: a reload creates nothing
    response = user_client.get(created["Location"])

    assert response.status_code == 200
    token = APIToken.objects.get(user=user)
    raw = response.context["created"]["raw"]
    assert raw.encode() in response.content and token.prefix.encode() in response.content
    assert response["Cache-Control"] == "no-store"

    listing = user_client.get("/settings/tokens/")
    assert listing.status_code == 200
    assert raw.encode() not in listing.content
    assert b"laptop" in listing.content and token.prefix.encode() in listing.content
    assert b"never" in listing.content  # last used

    assert token_authenticate(raw) == user
    assert b"never" not in user_client.get("/settings/tokens/").content
    assert APIToken.objects.filter(user=user).count() == 1


def test_the_new_token_waits_for_its_page_encrypted(user_client, user):
    user_client.post("/settings/tokens/", {"name": "laptop"})
    waiting = user_client.session[token_pages.CREATED_KEY]
    raw = user_client.get("/settings/tokens/").context["created"]["raw"]
    assert raw not in str(waiting)  # never in the session store as plaintext
    assert token_pages.CREATED_KEY not in user_client.session  # shown once


def test_revoke_from_page(user_client, user):
    token, raw = token_create(user=user, name="old")

    response = user_client.post(f"/settings/tokens/{token.pk}/revoke/")

    assert response.status_code == 302
    assert token_authenticate(raw) is None
    assert b"revoked" in user_client.get("/settings/tokens/").content


def test_cannot_see_or_revoke_someone_elses_token(user_client, other_user):
    token, raw = token_create(user=other_user, name="bob's secret script")

    assert b"bob&#x27;s secret script" not in user_client.get("/settings/tokens/").content
    assert user_client.post(f"/settings/tokens/{token.pk}/revoke/").status_code == 404
    assert token_authenticate(raw) == other_user


def test_page_refuses_revoke_by_get(user_client, user):
    token, _ = token_create(user=user, name="x")
    assert user_client.get(f"/settings/tokens/{token.pk}/revoke/").status_code == 405


# ------------------------------------------------------------------ management command


def test_create_api_token_command_prints_token_last(user):
    out, err = StringIO(), StringIO()

    call_command("create_api_token", "alice", "--name", "nightly", stdout=out, stderr=err)

    raw = out.getvalue().strip().splitlines()[-1]
    assert raw.startswith(TOKEN_PREFIX)
    assert token_authenticate(raw) == user
    assert APIToken.objects.get(user=user).name == "nightly"
    assert "shown only now" in err.getvalue() and raw not in err.getvalue()


def test_create_api_token_command_unknown_user(db):
    with pytest.raises(CommandError, match="No user named"):
        call_command("create_api_token", "nobody", stdout=StringIO(), stderr=StringIO())
    assert not APIToken.objects.exists()
