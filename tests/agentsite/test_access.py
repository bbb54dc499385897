"""Every app page needs a login; the admin needs staff."""

from __future__ import annotations

import pytest
from django.urls import reverse

from conversations.services import conversation_create

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/", "/c/1/"])
def test_app_pages_redirect_anonymous_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_login_page_renders_and_logs_in(client, user):
    page = client.get(reverse("login"))
    assert page.status_code == 200
    assert b'name="username"' in page.content
    response = client.post(reverse("login"), {"username": "alice", "password": "pw-alice-123"})
    assert response.status_code == 302
    assert client.get("/").status_code == 200


def test_wrong_password_shows_error(client, user):
    response = client.post(reverse("login"), {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert b"didn&#x27;t match" in response.content or b"didn't match" in response.content


def test_logout_is_a_post_and_ends_session(user_client):
    response = user_client.post(reverse("logout"))
    assert response.status_code == 302
    assert user_client.get("/").status_code == 302


def test_admin_refuses_non_staff(user_client):
    response = user_client.get("/admin/")
    assert response.status_code == 302
    assert "login" in response["Location"]


def test_admin_allows_staff(client, staff_user):
    client.force_login(staff_user)
    assert client.get("/admin/").status_code == 200


def test_base_template_loads_local_htmx_and_csrf_header(user_client):
    html = user_client.get("/").content.decode()
    assert "/static/django_htmx/htmx-2.min.js" in html
    assert "/static/django_htmx/ext/hx-ws-2.min.js" in html
    assert "https://" not in html.split("<body")[0]  # no CDN in <head>
    assert 'hx-headers=\'{"X-CSRFToken": "' in html


def test_static_files_are_served(user_client, live_server):
    import httpx

    response = httpx.get(f"{live_server.url}/static/django_htmx/htmx-2.min.js")
    assert response.status_code == 200
    assert "htmx" in response.text[:2000]


def test_another_users_conversation_is_404(client, user, other_user):
    conversation = conversation_create(owner=user, title="private")
    client.force_login(other_user)
    assert client.get(f"/c/{conversation.pk}/").status_code == 404
