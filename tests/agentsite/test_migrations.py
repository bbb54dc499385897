"""Models and migrations agree (tests run with --no-migrations, so this guards them)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_no_missing_migrations():
    out = io.StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # --check exits non-zero when a migration is missing
        pytest.fail(f"missing migrations (exit {exc.code}):\n{out.getvalue()}")


def test_migrations_apply_to_a_fresh_database(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(AGENTSITE_VAR_DIR=str(tmp_path), DEBUG="true")
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "Applying conversations.0001_initial... OK" in result.stdout
