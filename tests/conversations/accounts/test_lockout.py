"""Failed logins lock a username out from an address (django-axes): the login form, the
admin login, the message, the cool-off and an administrator's unlock."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.core.management import call_command
from django.http import HttpRequest
from django.utils import timezone

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"
HOME = "10.0.0.1"
ELSEWHERE = "10.0.0.2"


def log_in(client, username: str, password: str, *, path: str = LOGIN, address: str = HOME):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address)


def fail(client, username: str, times: int, **kwargs) -> list[int]:
    return [log_in(client, username, "wrong", **kwargs).status_code for _ in range(times)]


def limit() -> int:
    return settings.AXES_FAILURE_LIMIT


def test_the_defaults_are_safe():
    assert settings.AXES_FAILURE_LIMIT == 5
    assert settings.AXES_COOLOFF_TIME.total_seconds() == 15 * 60
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]
    assert settings.AUTHENTICATION_BACKENDS == [
        "axes.backends.AxesStandaloneBackend",  # first: refuses before checking the password
        "conversations.accounts.users.CachedUserBackend",
    ]


def test_wrong_passwords_then_the_right_one_is_refused_with_a_message(client, user):
    assert fail(client, "alice", limit() - 1) == [200] * (limit() - 1)
    locking = log_in(client, "alice", "wrong")
    assert locking.status_code == 429

    refused = log_in(client, "alice", "pw-alice-123")

    assert refused.status_code == 429
    assert refused["Retry-After"] == str(15 * 60)
    text = refused.content.decode()
    assert "Too many failed logins" in text and "Try again in 15 minutes" in text
    assert "ask an administrator" in text
    assert "_auth_user_id" not in client.session
    assert client.get("/").status_code == 302  # still on the login page


def test_the_lock_is_per_username_and_address(client, user, other_user):
    fail(client, "alice", limit())
    assert log_in(client, "alice", "pw-alice-123").status_code == 429
    # The same user from another address, and another user from this one, log in.
    assert log_in(client, "alice", "pw-alice-123", address=ELSEWHERE).status_code == 302
    client.logout()
    assert log_in(client, "bob", "pw-bob-123").status_code == 302


def test_the_lock_ends_after_the_cool_off(client, user):
    fail(client, "alice", limit())
    past = timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(seconds=1)
    AccessAttempt.objects.update(attempt_time=past)
    assert log_in(client, "alice", "pw-alice-123").status_code == 302


def test_a_login_clears_the_earlier_failures(client, user):
    fail(client, "alice", limit() - 1)
    assert log_in(client, "alice", "pw-alice-123").status_code == 302
    client.logout()
    assert fail(client, "alice", limit() - 1) == [200] * (limit() - 1)
    assert log_in(client, "alice", "pw-alice-123").status_code == 302


def test_the_admin_login_is_locked_too(client, staff_user):
    assert fail(client, "root", limit() - 1, path=ADMIN_LOGIN) == [200] * (limit() - 1)
    assert log_in(client, "root", "wrong", path=ADMIN_LOGIN).status_code == 429
    refused = log_in(client, "root", "pw-root-123", path=ADMIN_LOGIN)
    assert refused.status_code == 429 and "Too many failed logins" in refused.content.decode()
    assert client.get("/admin/").status_code == 302  # not logged in


def test_an_administrator_sees_and_removes_the_lock_in_the_admin(client, user, staff_user):
    fail(client, "alice", limit())
    admin = type(client)()
    admin.force_login(staff_user)
    listing = admin.get("/admin/axes/accessattempt/")
    assert listing.status_code == 200 and "alice" in listing.content.decode()

    attempt = AccessAttempt.objects.get(username="alice")
    deleted = admin.post(f"/admin/axes/accessattempt/{attempt.pk}/delete/", {"post": "yes"})

    assert deleted.status_code == 302
    assert log_in(client, "alice", "pw-alice-123").status_code == 302


@pytest.mark.parametrize(
    "command", [("axes_reset",), ("axes_reset_username", "alice"), ("axes_reset_ip", HOME)]
)
def test_a_management_command_unlocks(client, user, command):
    fail(client, "alice", limit())
    call_command(*command, verbosity=0)
    assert log_in(client, "alice", "pw-alice-123").status_code == 302


def test_client_login_passes_a_request_for_axes(client, user):
    """Axes needs the request; tests that use ``client.login`` pass one (or force_login)."""
    assert client.login(request=HttpRequest(), username="alice", password="pw-alice-123")
    assert client.get("/").status_code == 200


PROXY = "10.9.9.9"


def forged(client, username: str, chain: str, *, remote: str = PROXY):
    """A login attempt through one proxy: the client sent ``X-Forwarded-For`` itself and
    the proxy appended the address it saw. The connection (REMOTE_ADDR) is the proxy's,
    or, under daphne's ``--proxy-headers``, the header's first (the client's) address."""
    return client.post(
        LOGIN,
        {"username": username, "password": "wrong"},
        REMOTE_ADDR=remote,
        HTTP_X_FORWARDED_FOR=chain,
    )


@pytest.mark.parametrize(
    ("hops", "proxy_headers", "counted"),
    [(0, False, PROXY), (1, False, "203.0.113.7"), (1, True, "203.0.113.7")],
)
def test_forged_forwarded_addresses_get_no_fresh_counters(
    client, user, settings, hops, proxy_headers, counted
):
    """Each guess claims another address in X-Forwarded-For: the lock-out still holds,
    counted per the address the site's own proxy saw (or per the connection without one),
    also when the server was started with daphne's --proxy-headers."""
    settings.AGENTSITE_TRUSTED_PROXY_HOPS = hops
    codes = []
    for n in range(limit() + 2):
        first = f"198.51.100.{n}"
        remote = first if proxy_headers else PROXY
        codes.append(forged(client, "alice", f"{first}, 203.0.113.7", remote=remote).status_code)

    assert codes == [200] * (limit() - 1) + [429] * 3
    assert {a.ip_address for a in AccessAttempt.objects.filter(username="alice")} == {counted}


def test_behind_a_proxy_other_clients_are_not_locked_out(client, user, settings):
    settings.AGENTSITE_TRUSTED_PROXY_HOPS = 1
    fail_codes = [forged(client, "alice", "203.0.113.7").status_code for _ in range(limit())]
    assert fail_codes[-1] == 429

    assert forged(client, "alice", "203.0.113.8").status_code == 200  # another client
