"""A message posted by a process that executes no runs (a command or script in embedded
mode): its run fails at once saying so, the message stays, Retry works from the chat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

SCRIPT = """
import django, json
django.setup()
from django.contrib.auth import get_user_model
from conversations import services
from conversations.models import Run
user = get_user_model().objects.create_user(username="cli", password="pw-cli-123")
conversation = services.conversation_create(owner=user)
message, run, _ = services.message_post(conversation=conversation, user=user, content="hi")
run.refresh_from_db()
print(json.dumps({"status": run.status, "error": run.error, "kept": message.content}))
"""


def test_a_run_posted_without_a_runtime_fails_at_once_saying_why(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        "AGENTSITE_VAR_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "AGENTSITE_EXECUTION": "embedded",
        "SECRET_KEY": "a-key-for-this-test-" + "k" * 40,
    }
    env.pop("REDIS_URL", None)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True,
            timeout=180, check=True,
        )  # fmt: skip

    run("manage.py", "migrate", "--noinput", "-v0")
    out = json.loads(run("-c", SCRIPT).stdout.strip().splitlines()[-1])
    assert out["status"] == "failed" and out["kept"] == "hi"
    assert "executes no runs" in out["error"] and "Retry" in out["error"]
