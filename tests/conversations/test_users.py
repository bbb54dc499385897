"""Each request's user comes from the cache; a change to the user takes effect at once."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

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
