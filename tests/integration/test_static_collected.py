"""``make run`` serves static files as production does (issue 44): collected with content
hashes, compressed, cached for good, so the 5.5 MB mermaid bundle downloads once."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.integration.stack import (
    CSRF_INPUT,
    PASSWORD,
    PYTHON,
    REPO,
    USERNAME,
    _base_env,
    running_stack,
)

pytestmark = pytest.mark.integration

COLLECTED = {"AGENTSITE_STATIC_COLLECTED": "true", "DEBUG": "false"}
HASHED_MERMAID = re.compile(
    r'data-mermaid-bundle="(/static/vendor/mermaid/mermaid\.min\.[0-9a-f]{12}\.js)"'
)
HASHED_CSS = re.compile(r'href="(/static/css/app\.[0-9a-f]{12}\.css)"')


def collect(work: Path) -> None:
    """What ``make run`` does before it serves: prepare var/, then collectstatic."""
    env = _base_env(work, COLLECTED)
    for command in (["prepare_instance"], ["collectstatic", "--noinput", "-v", "0"]):
        subprocess.run([PYTHON, "manage.py", *command], cwd=REPO, env=env, check=True)


def test_collected_static_files_are_hashed_compressed_and_cached_for_good(tmp_path) -> None:
    collect(tmp_path)
    with (
        running_stack(mode="embedded", work=tmp_path, extra_env=COLLECTED) as stack,
        httpx.Client(base_url=stack.base_url) as http,
    ):
        login = http.get("/accounts/login/")
        stylesheet = HASHED_CSS.search(login.text)
        assert stylesheet, login.text[:800]

        # The chat page fetches mermaid (and hands it to its sandboxed frame).
        match = CSRF_INPUT.search(login.text)
        assert match, login.text[:800]
        signed_in = http.post(
            "/accounts/login/",
            data={"username": USERNAME, "password": PASSWORD, "csrfmiddlewaretoken": match[1]},
        )
        assert signed_in.status_code == 302, signed_in.status_code
        chats = http.get("/")
        assert chats.status_code == 200, chats.status_code
        bundle = HASHED_MERMAID.search(chats.text)
        assert bundle, chats.text[:800]

        first = http.get(bundle.group(1), headers={"Accept-Encoding": "gzip"})
        assert first.status_code == 200
        assert first.headers["Content-Encoding"] == "gzip"
        # Sent compressed: well under the 5.5 MB file.
        assert int(first.headers["Content-Length"]) < 2_500_000
        cache = first.headers["Cache-Control"]
        assert "max-age=315360000" in cache and "immutable" in cache

        # An unhashed name (a hand-written link) is still served, revalidated.
        plain = http.get("/static/css/app.css")
        assert plain.status_code == 200
        assert "immutable" not in plain.headers.get("Cache-Control", "")
