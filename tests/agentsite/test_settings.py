"""Settings load from the environment, with safe defaults when nothing is set, and write
nothing: `manage.py prepare_instance` makes var/ and the instance's key (issue 43)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, django
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
django.setup()
try:
    secret, secret_error = settings.SECRET_KEY, ""
except ImproperlyConfigured as exc:
    secret, secret_error = "", str(exc)
print(json.dumps({
    "debug": settings.DEBUG,
    "engine": settings.DATABASES["default"]["ENGINE"],
    "db_name": str(settings.DATABASES["default"]["NAME"]),
    "layer": settings.CHANNEL_LAYERS["default"]["BACKEND"],
    "broker": settings.CELERY_BROKER_URL,
    "eager": settings.CELERY_TASK_ALWAYS_EAGER,
    "execution": settings.AGENTSITE_EXECUTION,
    "secret": secret,
    "secret_error": secret_error,
    "hosts": settings.ALLOWED_HOSTS,
    "installed": settings.INSTALLED_APPS,
    "db_pool": settings.DATABASES["default"].get("OPTIONS", {}).get("pool"),
    "conn_max_age": settings.DATABASES["default"]["CONN_MAX_AGE"],
}))
"""

CONFIG_VARS = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS")


def clean_env(var: Path, **env: str) -> dict[str, str]:
    """This process's environment without the site's configuration, on ``var``."""
    clean = {k: v for k, v in os.environ.items() if k not in CONFIG_VARS}
    clean.update(DJANGO_SETTINGS_MODULE="agentsite.settings", AGENTSITE_VAR_DIR=str(var), **env)
    return clean


def load_settings(tmp_path: Path, **env: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=clean_env(tmp_path, **env),
        capture_output=True,
        text=True,
        check=True,
        umask=0o022,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def manage(var: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=clean_env(var, **env),
        capture_output=True,
        text=True,
        umask=0o022,
    )


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


def test_importing_the_settings_writes_nothing(tmp_path):
    """Not var/, not a key, not the SQLite file, not the media or static folders: a fresh
    process sets Django up on an empty var dir and one that does not exist."""
    var = tmp_path / "var"
    conf = load_settings(var)
    assert not var.exists()
    # Without a key Django refuses to hand one out: no process signs with an empty key.
    assert conf["secret"] == ""
    assert conf["secret_error"] == "The SECRET_KEY setting must not be empty."
    var.mkdir()
    load_settings(var, DEBUG="true")
    assert list(var.iterdir()) == []


def test_a_missing_key_is_refused_saying_what_to_do(tmp_path):
    result = manage(tmp_path, "migrate", "--noinput", DEBUG="true")
    assert result.returncode != 0
    assert "agentsite.E002" in result.stderr
    assert f"no generated key in {tmp_path / 'secret_key'}" in result.stderr
    assert "`make run`" in result.stderr and "manage.py prepare_instance" in result.stderr
    assert "set SECRET_KEY in the environment" in result.stderr
    assert not (tmp_path / "secret_key").exists()


def test_the_server_refuses_to_start_without_a_key(tmp_path):
    """Servers run no system checks: the ASGI application itself refuses, at import."""
    result = subprocess.run(
        [sys.executable, "-c", "import agentsite.asgi"],
        cwd=ROOT,
        env=clean_env(tmp_path, DEBUG="true"),
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is not set" in result.stderr
    assert "manage.py prepare_instance" in result.stderr


def test_the_generated_secret_is_read_and_kept(tmp_path):
    assert manage(tmp_path, "prepare_instance").returncode == 0
    first = load_settings(tmp_path)["secret"]
    assert manage(tmp_path, "prepare_instance").returncode == 0
    second = load_settings(tmp_path)["secret"]
    assert first == second and len(first) > 50 and not first.startswith("django-insecure-")
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
        ({}, False),  # the instance's own key (var/secret_key): DEBUG off, as make run
        ({"DEBUG": "true"}, False),
        ({"SECRET_KEY": "a-real-production-secret-" + "k" * 40}, False),
        ({"SECRET_KEY": "django-insecure-" + "k" * 50}, True),  # a template's key
        ({"SECRET_KEY": "django-insecure-" + "k" * 50, "DEBUG": "true"}, False),
    ],
)
def test_system_check_refuses_a_key_marked_insecure_without_debug(tmp_path, env, refused):
    assert manage(tmp_path, "prepare_instance", **env).returncode == 0
    result = manage(tmp_path, "check", **env)
    if refused:
        assert result.returncode != 0
        assert "agentsite.E001" in result.stderr
    else:
        assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("pool_size", "warned"), [("8", True), ("27", True), ("28", False)])
def test_system_check_warns_when_the_connection_pool_is_smaller_than_its_threads(
    tmp_path, pool_size, warned
):
    result = manage(
        tmp_path,
        "check",
        DEBUG="true",
        SECRET_KEY="a-real-production-secret-" + "k" * 40,
        DATABASE_URL="postgres://u:p@127.0.0.1:5432/agentsite",  # not connected to by check
        DB_POOL_SIZE=pool_size,
        AGENTSITE_DB_THREADS="16",
        AGENTSITE_HTTP_THREADS="8",
    )
    assert result.returncode == 0, result.stderr
    assert ("agentsite.W001" in result.stderr + result.stdout) is warned


SETTING_WITH_DEFAULT = re.compile(r"\b(?:get|has)attr\(\s*(?:django_)?settings\s*,")


def test_code_reads_each_setting_from_the_one_place_that_defaults_it():
    """Issue 43: settings.py defines every setting the code reads, with its default, and
    the code reads ``settings.X``: a ``getattr(settings, "X", default)`` would keep a
    second default that drifts from the first (it did: 90 s vs 25 s for a stale run)."""
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for package in ("agentsite", "core", "engine", "llms", "tools", "conversations")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name != "settings.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SETTING_WITH_DEFAULT.search(line)
    ]
    assert found == []
