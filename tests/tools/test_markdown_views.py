"""The frame where the chat page draws mermaid diagrams: its own, sandboxed policy."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.csp import parse_policy

pytestmark = pytest.mark.django_db


def test_the_mermaid_frame_is_sandboxed_and_allows_inline_styles_only_there(client):
    response = client.get(reverse("mermaid_frame"))  # no login: the page holds no data

    assert response.status_code == 200
    policy = parse_policy(response["Content-Security-Policy"])
    assert policy["sandbox"] == ["allow-scripts"]  # scripts, in an opaque origin
    assert policy["default-src"] == ["'none'"]
    # Its script, and mermaid from a blob: of the bundle the chat page fetched (cached
    # there; what the frame's opaque origin downloads is not).
    assert policy["script-src"] == ["'self'", "blob:"]
    assert policy["style-src"] == ["'self'", "'unsafe-inline'"]
    assert policy["frame-ancestors"] == ["'self'"]
    assert "connect-src" not in policy  # default-src 'none': it sends nothing anywhere
    assert response["X-Frame-Options"] == "SAMEORIGIN"
    body = response.content.decode()
    assert "js/mermaid_frame.js" in body
    assert "mermaid.min.js" not in body  # handed over by the page, never loaded from here
    assert "<script>" not in body and "style=" not in body  # nothing inline of its own


def test_every_other_page_keeps_the_strict_policy(client):
    policy = parse_policy(client.get(reverse("login"))["Content-Security-Policy"])

    assert policy["style-src"] == ["'self'"] and "sandbox" not in policy


def test_the_chat_page_names_the_mermaid_bundle_it_hands_to_the_frame(client, django_user_model):
    user = django_user_model.objects.create_user("reader", password="pw-reader-1234")
    client.force_login(user)
    body = client.get(reverse("conversation_list")).content.decode()

    assert 'data-mermaid-bundle="/static/vendor/mermaid/mermaid.min.js"' in body
    assert "data-mermaid-frame=" in body
