"""Failed bearer tokens count against the client's address: past the limit its bearer
requests get 429 JSON (with Retry-After) until the cool-off or an administrator's unlock."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from conversations.accounts.lockout import TOKEN_USERNAME

pytestmark = pytest.mark.django_db

HOME = "10.0.0.1"
ELSEWHERE = "10.0.0.2"
WRONG = "as_not-a-real-token"


def call(client, token: str, *, address: str = HOME, path: str = "/api/conversations"):
    return client.get(path, headers={"Authorization": f"Bearer {token}"}, REMOTE_ADDR=address)


def fail(client, times: int, **kwargs) -> list[int]:
    return [call(client, WRONG, **kwargs).status_code for _ in range(times)]


def limit() -> int:
    return settings.AXES_FAILURE_LIMIT


def assert_locked_out(response) -> None:
    assert response.status_code == 429
    assert response["Content-Type"] == "application/json"
    assert response["Retry-After"] == str(15 * 60)
    error = response.json()["error"]
    assert "Too many failed API token attempts" in error and "15 minutes" in error


def test_wrong_tokens_lock_the_address_out(client, token):
    assert fail(client, limit() - 1) == [401] * (limit() - 1)
    assert_locked_out(call(client, WRONG))  # the failure that reaches the limit
    # Refused before any token is checked: a valid one too, on every endpoint.
    assert_locked_out(call(client, token))
    assert_locked_out(call(client, token, path="/api/models"))
    assert_locked_out(call(client, token, path="/api/conversations/1/events"))
    attempt = AccessAttempt.objects.get()
    assert (attempt.username, attempt.ip_address) == (TOKEN_USERNAME, HOME)
    assert attempt.failures_since_start == limit()  # refusals are not counted


def test_other_addresses_and_sessions_are_not_locked_out(client, user, token):
    fail(client, limit())
    assert call(client, token, address=ELSEWHERE).status_code == 200
    # Passwords and sessions from the locked address are another matter.
    login = {"username": "alice", "password": "pw-alice-123"}
    assert client.post("/accounts/login/", login, REMOTE_ADDR=HOME).status_code == 302
    assert client.get("/api/conversations", REMOTE_ADDR=HOME).status_code == 200


def test_malformed_headers_are_not_token_attempts(client):
    for _ in range(limit() + 1):
        response = client.get("/api/models", headers={"Authorization": "Basic YWxpY2U6cHc="})
        assert response.status_code == 401
    assert not AccessAttempt.objects.exists()


def test_the_lock_ends_after_the_cool_off(client, token):
    fail(client, limit())
    past = timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(seconds=1)
    AccessAttempt.objects.update(attempt_time=past)
    assert call(client, token).status_code == 200


def test_an_administrator_unlocks_the_address(client, token):
    fail(client, limit())
    call_command("axes_reset_ip", HOME, verbosity=0)
    assert call(client, token).status_code == 200


def test_token_failures_never_lock_a_user_account(client, user):
    fail(client, limit() + 2)
    assert not AccessAttempt.objects.filter(username="alice").exists()
