"""Every response carries the strict Content-Security-Policy, and no template needs less.

The browser side (no violation on any page, the chat still streams) is checked in
Chromium by tests/e2e/test_csp.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from conversations.services import conversation_create
from tests.csp import parse_policy

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
SITE_POLICY = {
    "default-src": ["'none'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'"],
    "connect-src": ["'self'"],
    "frame-src": ["'self'"],
    "frame-ancestors": ["'none'"],
    "object-src": ["'none'"],
    "base-uri": ["'none'"],
    "form-action": ["'self'"],
}
TEMPLATE_DIRS = [ROOT / "templates", *ROOT.glob("*/templates")]
# What the policy refuses in markup: inline scripts, style blocks and attributes, inline
# event handlers (htmx's hx-on too: it needs eval) and javascript: URLs.
INLINE_CODE = {
    "inline <script>": re.compile(r"<script\b(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE),
    "<style> block": re.compile(r"<style\b", re.IGNORECASE),
    "style attribute": re.compile(r"\sstyle\s*=", re.IGNORECASE),
    "event handler attribute": re.compile(r"\son[a-z]+\s*=", re.IGNORECASE),
    "hx-on handler": re.compile(r"\s(?:data-)?hx-on[:-]", re.IGNORECASE),
    "javascript: URL": re.compile(r"javascript:", re.IGNORECASE),
}


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _policy(response) -> dict[str, list[str]]:
    assert "Content-Security-Policy" in response, f"no CSP on {response.status_code} response"
    return parse_policy(response["Content-Security-Policy"])


def test_the_login_page_gets_the_strict_policy(client):
    response = client.get(reverse("login"))

    assert response.status_code == 200
    assert _policy(response) == SITE_POLICY
    assert "unsafe" not in response["Content-Security-Policy"]


@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/?archived=1",
        "/c/{conversation}/",
        "/settings/tokens/",
        "/admin/",
        "/admin/llms/llmmodel/",
        "/admin/llms/usagerecord/",
        "/admin/tools/mcpserver/",
        "/admin/auth/user/add/",
        "/api/schema",
        "/no-such-page/",
    ],
)
def test_every_page_gets_the_strict_policy(client, staff_user, url):
    client.force_login(staff_user)
    conversation = conversation_create(owner=staff_user)

    response = client.get(url.format(conversation=conversation.pk))

    assert response.status_code in (200, 404), response.status_code
    assert _policy(response) == SITE_POLICY


def test_the_csrf_failure_page_gets_the_policy_and_needs_no_inline_style(user):
    client = Client(enforce_csrf_checks=True)

    response = client.post(reverse("login"), {"username": "alice", "password": "pw-alice-123"})

    assert response.status_code == 403
    assert _policy(response) == SITE_POLICY
    assert b"<style" not in response.content and b"css/app.css" in response.content


@pytest.mark.parametrize(
    "path", sorted({p for d in TEMPLATE_DIRS for p in d.rglob("*.html")}), ids=_relative
)
def test_no_template_has_inline_code(path):
    text = path.read_text()

    found = [what for what, pattern in INLINE_CODE.items() if pattern.search(text)]

    assert not found, f"{path.relative_to(ROOT)}: {', '.join(found)} (refused by the CSP)"


@pytest.mark.parametrize("path", sorted((ROOT / "static" / "js").glob("*.js")), ids=_relative)
def test_no_script_of_ours_evaluates_strings(path):
    text = path.read_text()

    assert not re.search(r"\beval\s*\(|new\s+Function\s*\(", text), path.name
