"""The deployment scripts, run for real: the image's entry point (its ``setup`` on a fresh
SQLite instance, the keys it generates once and hands to every command) and
deploy/collect-static (what nginx serves)."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

from tests.deploy.nginx import collect_static
from tests.integration.stack import REPO

ENTRYPOINT = REPO / "deploy" / "docker-entrypoint.sh"
KEY_VARIABLES = ("SECRET_KEY", "ENCRYPTION_KEYS", "DATABASE_URL", "REDIS_URL", "DEBUG")


def entrypoint(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The entry point as the image runs it: the venv first on PATH, state in tmp_path."""
    base = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    base.update(
        {
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "AGENTSITE_VAR_DIR": str(tmp_path / "var"),
            "AGENTSITE_KEYS_DIR": str(tmp_path / "keys"),
            # A model server that needs no probe (not the bundled model, which would start).
            "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
            "AGENTSITE_PUBLIC_URL": "https://chat.example.com/",
        }
    )
    base.update(env)
    return subprocess.run(
        [str(ENTRYPOINT), *args],
        cwd=REPO,
        env=base,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


PRINT_KEYS = ["sh", "-c", 'printf "%s\\n%s\\n" "$SECRET_KEY" "$ENCRYPTION_KEYS"']


def test_setup_makes_the_keys_once_and_every_command_gets_them(tmp_path) -> None:
    first = entrypoint(tmp_path, "setup")
    assert first.returncode == 0, first.stdout + first.stderr
    keys = tmp_path / "keys"
    secret, fernet = (
        (keys / "secret_key").read_text().strip(),
        (keys / "encryption_keys").read_text().strip(),
    )
    assert len(secret) > 50 and not secret.startswith("django-insecure-")
    assert len(fernet) == 44  # a urlsafe-base64 Fernet key
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700
    for name in ("secret_key", "encryption_keys"):
        assert stat.S_IMODE((keys / name).stat().st_mode) == 0o600
    assert f"generated {keys}/secret_key" in first.stdout
    assert "First admin account created" in first.stdout
    assert "Log in at https://chat.example.com/" in first.stdout
    assert "created provider 'openai'" in first.stdout
    with sqlite3.connect(tmp_path / "var" / "db.sqlite3") as db:
        [(admins,)] = db.execute("SELECT count(*) FROM auth_user WHERE is_superuser").fetchall()
    assert admins == 1

    again = entrypoint(tmp_path, "setup")  # every `docker compose up` runs it again
    assert again.returncode == 0, again.stdout + again.stderr
    assert "generated" not in again.stdout and "already exists" in again.stdout
    assert (keys / "secret_key").read_text().strip() == secret

    shown = entrypoint(tmp_path, *PRINT_KEYS)
    assert shown.stdout.splitlines() == [secret, fernet]
    # A key set in the environment wins over the volume's.
    chosen = entrypoint(tmp_path, *PRINT_KEYS, SECRET_KEY="from-the-env")
    assert chosen.stdout.splitlines() == ["from-the-env", fernet]


def test_without_setup_nothing_is_generated(tmp_path) -> None:
    result = entrypoint(tmp_path, *PRINT_KEYS)
    assert result.returncode == 0 and result.stdout.splitlines() == ["", ""]
    assert not (tmp_path / "keys").exists()


def test_collect_static_fills_a_world_readable_tree_with_gzip_copies(tmp_path) -> None:
    dest = tmp_path / "srv" / "static"
    collect_static(dest)
    mermaid = dest / "vendor" / "mermaid" / "mermaid.min.js"
    packed = mermaid.with_name("mermaid.min.js.gz")
    assert packed.stat().st_size < mermaid.stat().st_size / 3
    assert (dest / "admin" / "css" / "base.css.gz").exists()
    assert not (dest / "vendor" / "mermaid" / "LICENSE.gz").exists()  # only what nginx sends
    for path in [dest, *dest.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o004, path  # nginx runs as another user
        if path.is_dir():
            assert mode & 0o001, path
    stale = dest / "js" / "removed-in-this-release.js"
    stale.write_text("old")
    collect_static(dest)  # an upgrade: the tree is replaced whole, nothing left behind
    assert not stale.exists() and mermaid.exists()
    assert sorted(p.name for p in dest.parent.iterdir()) == ["static"]
