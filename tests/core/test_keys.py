"""A key that cannot read the stored secrets: refused at start and by `manage.py check`,
naming the setting and the fix; `forget_undecryptable_secrets` empties them so an admin
can enter them again (issue 44)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from core.checks import check_stored_secrets_decrypt
from core.crypto import generate_key, reset_cache
from llms.models import Provider
from tests.tools.conftest import free_port

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh_keys() -> Iterator[None]:
    reset_cache()
    yield
    reset_cache()


def codes(errors) -> list[str]:
    return [error.id for error in errors]


@pytest.mark.django_db
def test_a_changed_secret_key_is_reported_and_the_secrets_can_be_entered_again(settings):
    settings.ENCRYPTION_KEYS = []  # the key derives from SECRET_KEY
    provider = Provider.objects.create(name="acme", base_url="http://x/v1", api_key="sk-1")
    assert check_stored_secrets_decrypt(None) == []

    settings.SECRET_KEY = "another-secret-key-" + "z" * 40
    reset_cache()
    [error] = check_stored_secrets_decrypt(None)
    assert error.id == "agentsite.E003"
    assert "SECRET_KEY" in error.msg and f"llms.Provider #{provider.pk}" in error.msg
    assert "forget_undecryptable_secrets" in error.hint

    out = StringIO()
    call_command("forget_undecryptable_secrets", "--dry-run", stdout=out)
    assert f"would empty llms.Provider #{provider.pk}" in out.getvalue()
    assert codes(check_stored_secrets_decrypt(None)) == ["agentsite.E003"]  # dry: kept
    call_command("forget_undecryptable_secrets", stdout=out)
    assert check_stored_secrets_decrypt(None) == []
    provider.refresh_from_db()  # loads again: the admin can enter the key anew
    assert provider.api_key == "" and provider.name == "acme"


@pytest.mark.django_db
def test_encryption_keys_name_the_setting_and_old_keys_still_read(settings):
    old, new = generate_key(), generate_key()
    settings.ENCRYPTION_KEYS = [old]
    Provider.objects.create(name="acme", base_url="http://x/v1", api_key="sk-1")

    settings.ENCRYPTION_KEYS = [new]
    reset_cache()
    [error] = check_stored_secrets_decrypt(None)
    assert "ENCRYPTION_KEYS" in error.msg and "ENCRYPTION_KEYS" in error.hint

    settings.ENCRYPTION_KEYS = [new, old]  # rotation: the old key after the new one
    reset_cache()
    assert check_stored_secrets_decrypt(None) == []


def test_servers_and_workers_refuse_to_start_with_a_key_that_cannot_read(tmp_path):
    """What `agentsite-server` and `manage.py check` say after SECRET_KEY changed under a
    stored provider key; after the fix the check passes."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        "AGENTSITE_VAR_DIR": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SECRET_KEY": "the-first-secret-key-" + "a" * 40,
        "ENCRYPTION_KEYS": "",
    }
    env.pop("REDIS_URL", None)

    def run(*args: str, **more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args], cwd=REPO, env={**env, **more},
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip

    assert run("manage.py", "migrate", "--noinput", "-v0").returncode == 0
    create = (
        "from llms.models import Provider; "
        "Provider.objects.create(name='acme', base_url='http://x/v1', api_key='sk-1')"
    )
    assert run("manage.py", "shell", "-c", create).returncode == 0
    changed = {"SECRET_KEY": "a-changed-secret-key-" + "b" * 40}

    port = str(free_port())
    started = run(
        "-m",
        "agentsite.server",
        "-b",
        "127.0.0.1",
        "-p",
        port,
        "agentsite.asgi:application",
        **changed,
    )
    assert started.returncode != 0
    assert "1 stored secret(s) cannot be decrypted with the configured SECRET_KEY" in started.stderr
    assert "forget_undecryptable_secrets" in started.stderr
    checked = run("manage.py", "check", **changed)
    assert checked.returncode != 0 and "agentsite.E003" in checked.stderr

    assert run("manage.py", "forget_undecryptable_secrets", **changed).returncode == 0
    assert run("manage.py", "check", **changed).returncode == 0
