"""Settings load from the environment, with safe defaults when nothing is set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, django
from django.conf import settings
django.setup()
print(json.dumps({
    "debug": settings.DEBUG,
    "engine": settings.DATABASES["default"]["ENGINE"],
    "db_name": str(settings.DATABASES["default"]["NAME"]),
    "layer": settings.CHANNEL_LAYERS["default"]["BACKEND"],
    "broker": settings.CELERY_BROKER_URL,
    "eager": settings.CELERY_TASK_ALWAYS_EAGER,
    "execution": settings.AGENTSITE_EXECUTION,
    "secret": settings.SECRET_KEY,
    "hosts": settings.ALLOWED_HOSTS,
    "installed": settings.INSTALLED_APPS,
    "db_pool": settings.DATABASES["default"].get("OPTIONS", {}).get("pool"),
    "conn_max_age": settings.DATABASES["default"]["CONN_MAX_AGE"],
}))
"""

CONFIG_VARS = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS")


def load_settings(tmp_path: Path, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in CONFIG_VARS}
    clean.update(
        DJANGO_SETTINGS_MODULE="agentsite.settings", AGENTSITE_VAR_DIR=str(tmp_path), **env
    )
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_defaults_without_env_are_embedded_and_safe(tmp_path):
    conf = load_settings(tmp_path)
    assert conf["debug"] is False
    assert conf["engine"] == "django.db.backends.sqlite3"
    assert conf["db_name"] == str(tmp_path / "db.sqlite3")
    assert conf["layer"] == "channels.layers.InMemoryChannelLayer"
    assert conf["broker"] == "memory://"
    assert conf["eager"] is True
    assert conf["execution"] == "embedded"
    assert conf["hosts"] == ["127.0.0.1", "localhost", "[::1]"]
    assert conf["installed"][0] == "daphne"


def test_generated_secret_is_persisted_and_reused(tmp_path):
    first = load_settings(tmp_path)["secret"]
    second = load_settings(tmp_path)["secret"]
    assert first == second and len(first) > 50
    secret_file = tmp_path / "secret_key"
    assert secret_file.read_text() == first
    assert oct(secret_file.stat().st_mode & 0o777) == "0o600"


def test_env_vars_switch_to_team_mode(tmp_path):
    conf = load_settings(
        tmp_path,
        DATABASE_URL="postgres://u:p@127.0.0.1:5432/agentsite",
        REDIS_URL="redis://127.0.0.1:6379/0",
        SECRET_KEY="x" * 60,
        DEBUG="true",
        ALLOWED_HOSTS="chat.example.com,localhost",
    )
    assert conf["engine"] == "django.db.backends.postgresql"
    # Django's pool, not persistent connections: requests run in threads of their own.
    assert conf["db_pool"]["max_size"] >= 16 and conf["conn_max_age"] == 0
    assert conf["layer"] == "channels_redis.pubsub.RedisPubSubChannelLayer"
    assert conf["broker"] == "redis://127.0.0.1:6379/0"
    assert conf["eager"] is False
    assert conf["execution"] == "celery"
    assert conf["secret"] == "x" * 60
    assert conf["debug"] is True
    assert conf["hosts"] == ["chat.example.com", "localhost"]
    assert not (tmp_path / "secret_key").exists()


@pytest.mark.parametrize(
    ("env", "refused"),
    [
        ({}, True),
        ({"DEBUG": "true"}, False),
        ({"SECRET_KEY": "a-real-production-secret-" + "k" * 40}, False),
    ],
)
def test_system_check_refuses_dev_secret_without_debug(tmp_path, env, refused):
    clean = {k: v for k, v in os.environ.items() if k not in CONFIG_VARS}
    clean.update(AGENTSITE_VAR_DIR=str(tmp_path), **env)
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=clean, capture_output=True, text=True
    )
    if refused:
        assert result.returncode != 0
        assert "agentsite.E001" in result.stderr
    else:
        assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("pool_size", "warned"), [("8", True), ("27", True), ("28", False)])
def test_system_check_warns_when_the_connection_pool_is_smaller_than_its_threads(
    tmp_path, pool_size, warned
):
    clean = {k: v for k, v in os.environ.items() if k not in CONFIG_VARS}
    clean.update(
        AGENTSITE_VAR_DIR=str(tmp_path),
        DEBUG="true",
        DATABASE_URL="postgres://u:p@127.0.0.1:5432/agentsite",  # not connected to by check
        DB_POOL_SIZE=pool_size,
        AGENTSITE_DB_THREADS="16",
        AGENTSITE_HTTP_THREADS="8",
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=clean, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert ("agentsite.W001" in result.stderr + result.stdout) is warned
