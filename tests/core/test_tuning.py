"""Interpreter tuning of the streaming processes, checked in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from core.tuning import WARM_TEMPLATES, YOUNG_COLLECTION_THRESHOLD

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json, sys
import agentsite.asgi
from django.template import engines
from engine.llm.openai import _ssl_context

state = {"frozen": gc.get_freeze_count(), "young": gc.get_threshold()[0]}
cached = [
    name
    for wrapper in engines["django"].engine.template_loaders
    for loader in getattr(wrapper, "loaders", [wrapper])
    for name in getattr(loader, "get_template_cache", {})
]
warm = {
    "templates": sorted(cached),
    "tls": _ssl_context.cache_info().currsize,
}
print(json.dumps({**state, "switch": sys.getswitchinterval(), "warm": warm}))
"""


def test_the_asgi_server_tunes_the_collector_and_hands_the_gil_over_often():
    """Full collections would walk every object Django and the app allocated at start-up
    (pauses mid-stream); the ASGI entry point freezes them once the app is built."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentsite.settings"}
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    state = json.loads(result.stdout.strip().splitlines()[-1])
    assert state["frozen"] > 50_000  # Django, the apps and the URLconf's views
    assert state["young"] == YOUNG_COLLECTION_THRESHOLD  # CPython default: 700
    assert state["switch"] == 0.001


def test_the_asgi_server_loads_what_the_first_run_needs_before_serving():
    """The first run after a start must not compile templates or load the TLS context
    while its user waits: the server does that while it starts."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentsite.settings"}
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    warm = json.loads(result.stdout.strip().splitlines()[-1])["warm"]
    assert set(WARM_TEMPLATES) <= set(warm["templates"])
    assert warm["tls"] == 1
