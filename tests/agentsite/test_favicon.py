"""Every page names the site's icon (issue 47: there was none), and the icon is one of
the static files the site serves."""

from __future__ import annotations

import pytest
from django.contrib.staticfiles import finders

pytestmark = pytest.mark.django_db


def test_pages_link_the_icon_and_it_exists(user_client, client) -> None:
    pages = [user_client.get(path) for path in ("/", "/settings/", "/presets/")]
    user_client.logout()
    pages.append(client.get("/accounts/login/"))
    for page in pages:
        assert page.status_code == 200
        assert '<link rel="icon" href="/static/favicon.svg' in page.content.decode()
    icon = finders.find("favicon.svg")
    assert icon is not None
    with open(icon, encoding="utf-8") as handle:
        assert handle.read().startswith("<svg")
