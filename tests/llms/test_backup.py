"""Backups: dumpdata writes encrypted fields as tokens; loaddata restores working secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.serializers.base import DeserializationError

from core.crypto import PREFIX, encrypt, generate_key, reset_cache
from llms.models import Provider
from llms.services import model_upsert, provider_upsert
from testing.scripted_server import ScriptedServer
from tests.llms.conftest import SECRET_KEY_VALUE, probe_rules
from tools.models import MCPServer, ToolConfig

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
HEADER_SECRET = "header-secret-value-5678"
TOOL_SECRET = "tool-secret-token-9012"
MCP_SECRET = "mcp-env-secret-3456"
MCP_HEADER_SECRET = "mcp-header-secret-7890"
SECRETS = (SECRET_KEY_VALUE, HEADER_SECRET, TOOL_SECRET, MCP_SECRET, MCP_HEADER_SECRET)
# The documented backup command (docs/deployment.md): everything but what migrate rebuilds.
DUMP_OPTIONS = {
    "natural_foreign": True,
    "natural_primary": True,
    "exclude": ["contenttypes", "auth.permission", "sessions"],
    "indent": 1,
}


@pytest.fixture
def key(settings) -> str:
    settings.ENCRYPTION_KEYS = [generate_key()]
    reset_cache()
    return settings.ENCRYPTION_KEYS[0]


def store_secrets(base_url: str) -> None:
    provider, _ = provider_upsert(
        name="backed-up",
        base_url=base_url,
        api_key=SECRET_KEY_VALUE,
        extra_headers={"X-Api-Key": HEADER_SECRET},
    )
    model_upsert(provider=provider, model_id="scripted-model", is_default=True)
    tool = ToolConfig(name="web_search", config={"provider": "brave"})
    tool.secrets_dict = {"api_key": TOOL_SECRET}
    tool.save()
    server = MCPServer(name="files", command="mcp-files")
    server.env_dict = {"TOKEN": MCP_SECRET}
    server.headers_dict = {"Authorization": MCP_HEADER_SECRET}
    server.save()


def dump(path: Path) -> str:
    call_command("dumpdata", output=str(path), **DUMP_OPTIONS)
    return path.read_text()


def test_dumpdata_writes_tokens_not_secrets(key, tmp_path):
    store_secrets("https://llm.example.test/v1")
    text = dump(tmp_path / "backup.json")
    for secret in SECRETS:
        assert secret not in text
    fields = {
        (row["model"], name): value
        for row in json.loads(text)
        for name, value in row["fields"].items()
    }
    for field in (
        ("llms.provider", "api_key"),
        ("llms.provider", "extra_headers_secret"),
        ("tools.toolconfig", "secrets"),
        ("tools.mcpserver", "env"),
        ("tools.mcpserver", "headers"),
    ):
        assert fields[field].startswith(PREFIX), field


def test_an_empty_secret_stays_empty(key, tmp_path):
    Provider.objects.create(name="keyless", base_url="http://127.0.0.1:9/v1")
    (row,) = [
        r for r in json.loads(dump(tmp_path / "backup.json")) if r["model"] == "llms.provider"
    ]
    assert row["fields"]["api_key"] == "" and row["fields"]["extra_headers_secret"] == ""


def test_loaddata_into_a_fresh_database_restores_working_secrets(key, tmp_path):
    """Another process, another database file, another SECRET_KEY: the same keys."""
    with ScriptedServer(api_key=SECRET_KEY_VALUE) as server:
        server.set_rules(probe_rules())
        store_secrets(server.base_url)
        backup = tmp_path / "backup.json"
        dump(backup)
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DATABASE_URL", "REDIS_URL", "AGENTSITE_EXECUTION")
        }
        env.update(
            AGENTSITE_VAR_DIR=str(tmp_path / "restored"),
            ENCRYPTION_KEYS=key,
            SECRET_KEY="another-secret-key-for-the-restored-site",
            DEBUG="true",
            DJANGO_SETTINGS_MODULE="agentsite.settings",
        )
        done = subprocess.run(
            [sys.executable, "-c", RESTORE_SCRIPT, str(backup), SECRET_KEY_VALUE],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        restored = json.loads(done.stdout.strip().splitlines()[-1])
        # The probe's plain chat passed the server's key check: the key works.
        assert server.requests and all(
            r.headers["authorization"] == f"Bearer {SECRET_KEY_VALUE}" for r in server.requests
        )
    assert restored == {
        "api_key": SECRET_KEY_VALUE,
        "extra_headers": {"X-Api-Key": HEADER_SECRET},
        "tool": {"api_key": TOOL_SECRET},
        "mcp": [{"TOKEN": MCP_SECRET}, {"Authorization": MCP_HEADER_SECRET}],
        "raw_is_token": True,
    }


# Run in a fresh process: migrate, load the backup, probe the model (a plain chat with
# the restored key), then print what was restored. argv: the backup file, the API key.
RESTORE_SCRIPT = """
import json
import sys

import django

django.setup()
from django.core.management import call_command
from django.core.serializers.base import DeserializationError
from django.db import connection

from llms.models import Provider
from tools.models import MCPServer, ToolConfig

backup, api_key = sys.argv[1:]
call_command("prepare_instance", verbosity=0)  # a fresh instance: its var/ first
call_command("migrate", verbosity=0)
call_command("loaddata", backup, verbosity=0)
call_command("probe_models", "--all", "--timeout", "10", verbosity=0)
provider = Provider.objects.get(name="backed-up")
server = MCPServer.objects.get(name="files")
with connection.cursor() as cursor:
    cursor.execute("SELECT api_key FROM llms_provider WHERE name = 'backed-up'")
    raw = cursor.fetchone()[0]
restored = {
    "api_key": provider.api_key,
    "extra_headers": provider.extra_headers,
    "tool": ToolConfig.objects.get(name="web_search").secrets_dict,
    "mcp": [server.env_dict, server.headers_dict],
    "raw_is_token": raw.startswith("fernet:") and api_key not in raw,
}
print(json.dumps(restored))
"""


def test_loaddata_without_the_key_fails_loudly(key, settings, tmp_path):
    store_secrets("https://llm.example.test/v1")
    backup = tmp_path / "backup.json"
    dump(backup)
    Provider.objects.all().delete()
    settings.ENCRYPTION_KEYS = [generate_key()]  # the backup's key is lost
    reset_cache()
    with pytest.raises(DeserializationError, match="cannot decrypt"):
        call_command("loaddata", str(backup), verbosity=0)


def test_model_validation_does_not_decrypt_a_pasted_token(key):
    """Only fixtures decrypt: a token typed into a form or command stays text, so holding
    a stolen backup without the key does not get a secret sent anywhere."""
    token = encrypt(SECRET_KEY_VALUE)
    provider, _ = provider_upsert(name="pasted", base_url="http://127.0.0.1:9/v1", api_key=token)
    assert Provider.objects.get(pk=provider.pk).api_key == token
    field = Provider._meta.get_field("api_key")
    assert field.to_python(token) == SECRET_KEY_VALUE  # what loaddata does
    with pytest.raises(ValidationError):
        field.to_python(PREFIX + "not-a-token")
