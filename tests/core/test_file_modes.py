"""The app's data is private (issue 28): var/ and the media root 0700, their files 0600,
whatever the umask, for a new install and for an existing one tightened by
``manage.py prepare_instance`` (issue 43: importing the settings writes nothing).

Each case runs fresh Python processes under umask 022 with their own AGENTSITE_VAR_DIR:
``manage.py prepare_instance``, as ``make run`` does, then the app, which imports the
settings, writes through SQLite (WAL) and saves a media file through Django's default
storage, the way the app does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

SCRIPT = """
import json, os, django
django.setup()
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
    cursor.execute("INSERT INTO t VALUES (1)")
default_storage.save("artifacts/7/9/report.html", ContentFile(b"<h1>x</h1>"))
var = os.environ["AGENTSITE_VAR_DIR"]
modes = {}
for root, dirs, files in os.walk(var):
    for name in dirs + files:
        path = os.path.join(root, name)
        modes[os.path.relpath(path, var)] = oct(os.stat(path).st_mode & 0o777)
modes["."] = oct(os.stat(var).st_mode & 0o777)
print(json.dumps(modes))
"""


def _env(var: Path, **extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "MEDIA_ROOT", "SECRET_KEY", "REDIS_URL"}
    }
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "agentsite.settings",
            "AGENTSITE_VAR_DIR": str(var),
            "DEBUG": "true",
            **extra,
        }
    )
    return env


def _python(var: Path, *args: str, **extra: str) -> str:
    done = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=_env(var, **extra),
        cwd=settings.BASE_DIR,
        umask=0o022,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _prepare(var: Path, **extra: str) -> str:
    return _python(var, "manage.py", "prepare_instance", **extra)


def _run_app(var: Path) -> dict[str, str]:
    return json.loads(_python(var, "-c", SCRIPT).splitlines()[-1])


def _modes(var: Path) -> dict[str, str]:
    return {str(path.relative_to(var)): oct(path.stat().st_mode & 0o777) for path in var.rglob("*")}


def _assert_private(modes: dict[str, str]) -> None:
    for name in (".", "media", "media/artifacts", "media/artifacts/7", "media/artifacts/7/9"):
        assert modes[name] == "0o700", (name, modes)
    for name in ("db.sqlite3", "db.sqlite3-wal", "db.sqlite3-shm", "secret_key"):
        assert modes[name] == "0o600", (name, modes)
    assert modes["media/artifacts/7/9/report.html"] == "0o600"


def test_a_new_install_is_private(tmp_path: Path):
    var = tmp_path / "var"
    _prepare(var)
    assert _modes(var) == {
        "secret_key": "0o600",
        "db.sqlite3": "0o600",  # empty, so that SQLite gives its -wal and -shm its mode
        "media": "0o700",
        "staticfiles": "0o700",
    }
    assert oct(var.stat().st_mode & 0o777) == "0o700"
    _assert_private(_run_app(var))


def test_an_existing_install_is_tightened(tmp_path: Path):
    var = tmp_path / "var"
    (var / "media").mkdir(parents=True)
    for directory in (var, var / "media"):
        directory.chmod(0o755)
    for name in ("db.sqlite3", "secret_key"):
        path = var / name
        path.write_text("django-insecure-old-key" if name == "secret_key" else "")
        path.chmod(0o644)
    _prepare(var)
    _assert_private(_run_app(var))
    assert (var / "secret_key").read_text() == "django-insecure-old-key"  # sessions survive


def test_prepare_instance_is_idempotent(tmp_path: Path):
    var = tmp_path / "var"
    first = _prepare(var)
    assert "created" in first and "a new SECRET_KEY for this instance" in first
    key, modes = (var / "secret_key").read_text(), _modes(var)
    _run_app(var)  # the database now holds a table and the media an artifact
    database = (var / "db.sqlite3").read_bytes()
    again = _prepare(var)
    assert "created" not in again and "instance ready" in again
    assert (var / "secret_key").read_text() == key
    assert (var / "db.sqlite3").read_bytes() == database
    assert {name: _modes(var)[name] for name in modes} == modes


def test_with_secret_key_in_the_environment_no_key_file_is_made(tmp_path: Path):
    var = tmp_path / "var"
    _prepare(var, SECRET_KEY="a-real-production-secret-" + "k" * 40)
    assert not (var / "secret_key").exists()
    assert _modes(var) == {"db.sqlite3": "0o600", "media": "0o700", "staticfiles": "0o700"}
