"""/healthz and /readyz: public, JSON, and /readyz names the part that is not ready."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tools.conftest import free_port

REPO = Path(__file__).resolve().parents[2]


def test_healthz_answers_without_logging_in(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.django_db
def test_readyz_says_every_part_is_ready(client):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ready"
    assert body["checks"]["database"] == body["checks"]["migrations"] == "ok"
    assert body["checks"]["broker"].startswith("not used")  # embedded mode


READYZ_IN_A_FRESH_INSTANCE = """
import django, json
django.setup()
from django.test import Client
response = Client(HTTP_HOST="127.0.0.1").get("/readyz")
print(response.status_code, json.dumps(response.json()))
"""


def test_readyz_names_migrations_not_applied(tmp_path):
    """A server started on a database nobody migrated yet: the database answers, the
    migrations do not hold, and the answer says what to run."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        "AGENTSITE_VAR_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    env.pop("REDIS_URL", None)
    run = functools.partial(
        subprocess.run, cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    run([sys.executable, "manage.py", "prepare_instance"], check=True)
    result = run([sys.executable, "-c", READYZ_IN_A_FRESH_INSTANCE], check=True)
    status, body = result.stdout.strip().splitlines()[-1].split(" ", 1)
    checks = json.loads(body)["checks"]
    assert status == "503"
    assert checks["database"] == "ok"
    assert checks["migrations"].startswith("failed")
    assert "manage.py migrate" in checks["migrations"]


@pytest.mark.django_db
def test_readyz_names_an_unreachable_redis_and_broker(client, settings):
    """Team mode with Redis gone: the cache and the broker say so, and the answer is 503."""
    dead = f"redis://127.0.0.1:{free_port()}/0"
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": dead,
            "OPTIONS": {"socket_connect_timeout": 1},
        }
    }
    settings.AGENTSITE_EXECUTION = "celery"
    from celery import current_app

    previous = current_app.conf.broker_url
    current_app.conf.broker_url = dead
    try:
        response = client.get("/readyz")
    finally:
        current_app.conf.broker_url = previous
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["database"] == "ok"
    assert checks["cache"].startswith("failed") and "onnect" in checks["cache"]
    assert checks["broker"].startswith("failed")
