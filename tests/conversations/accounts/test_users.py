"""Each request's user comes from the cache; a change to the user takes effect at once."""

from __future__ import annotations

import socket

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from redis.exceptions import ConnectionError as RedisConnectionError

pytestmark = pytest.mark.django_db


def user_queries(client) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/").status_code == 200
    table = '"auth_user"'
    return [q["sql"] for q in queries.captured_queries if f"FROM {table}" in q["sql"]]


def test_a_signed_in_users_requests_do_not_read_the_user_table(user_client):
    user_client.get("/")  # the first request fills the cache

    assert user_queries(user_client) == []


def test_a_deactivated_user_is_signed_out_at_the_next_request(user_client, user):
    user_client.get("/")
    user.is_active = False
    user.save()

    response = user_client.get("/")

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_a_password_change_ends_the_users_other_sessions(client, user, django_user_model):
    client.force_login(user)
    client.get("/")
    elsewhere = django_user_model.objects.get(pk=user.pk)
    elsewhere.set_password("a-new-password-456")
    elsewhere.save()

    assert client.get("/").status_code == 302


def test_a_deleted_user_is_signed_out(user_client, user):
    user_client.get("/")
    user.delete()

    assert user_client.get("/").status_code == 302


def test_staff_rights_given_later_apply_at_once(user_client, user):
    user_client.get("/admin/")
    user.is_staff = user.is_superuser = True
    user.save()

    assert user_client.get("/admin/").status_code == 200


@pytest.fixture
def redis_down(settings):
    """The cache is a Redis server that does not answer (a port nothing listens on)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: connections are refused
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/0",
        }
    }


def test_a_signed_in_user_keeps_using_the_site_while_redis_is_down(user_client, redis_down):
    """Sessions live in the database and the user cache falls back to it: a Redis outage
    does not sign anyone out or fail a page."""
    response = user_client.get("/")

    assert response.status_code == 200
    assert user_queries(user_client)  # read from the database instead


def test_a_change_to_a_user_fails_while_redis_is_down(user, redis_down):
    """A change whose cache entry cannot be dropped fails (and, in a transaction, rolls
    back): otherwise a deactivated user's stale entry could sign them in again later."""
    user.is_active = False
    with pytest.raises(RedisConnectionError), transaction.atomic():
        user.save()

    user.refresh_from_db()
    assert user.is_active
