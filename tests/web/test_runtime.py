"""Interpreter tuning of the streaming processes, checked in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentsite.runtime import YOUNG_COLLECTION_THRESHOLD

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json, sys
import agentsite.asgi
state = {"frozen": gc.get_freeze_count(), "young": gc.get_threshold()[0]}
print(json.dumps({**state, "switch": sys.getswitchinterval()}))
"""


def test_the_asgi_server_tunes_the_collector_and_hands_the_gil_over_often():
    """Full collections walked every object Django and the app allocated at start-up (90 ms
    pauses mid-stream); the ASGI entry point freezes them once the app is built."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentsite.settings"}
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    state = json.loads(result.stdout.strip().splitlines()[-1])
    assert state["frozen"] > 50_000  # Django, the apps and the URLconf's views
    assert state["young"] == YOUNG_COLLECTION_THRESHOLD  # CPython default: 700
    assert state["switch"] == 0.001
