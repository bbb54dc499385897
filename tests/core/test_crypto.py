"""Secrets are encrypted at rest and survive key rotation."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from core.crypto import generate_key, reset_cache
from llms.models import Provider
from llms.services import provider_upsert
from tests.llms.conftest import SECRET_KEY_VALUE
from tools.models import ToolConfig

pytestmark = pytest.mark.django_db


def raw(table: str, column: str, pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {table} WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def use_keys(settings, *keys: str) -> None:
    settings.ENCRYPTION_KEYS = list(keys)
    reset_cache()


def test_api_key_round_trip_and_no_plaintext_in_db():
    provider, _ = provider_upsert(
        name="p",
        base_url="https://example.test/v1",
        api_key=SECRET_KEY_VALUE,
        extra_headers={"X-Api-Key": "header-secret-value"},
    )
    fresh = Provider.objects.get(pk=provider.pk)
    assert fresh.api_key == SECRET_KEY_VALUE
    assert fresh.extra_headers == {"X-Api-Key": "header-secret-value"}
    stored_key = raw("llms_provider", "api_key", provider.pk)
    stored_headers = raw("llms_provider", "extra_headers_secret", provider.pk)
    assert stored_key.startswith("fernet:")
    assert SECRET_KEY_VALUE not in stored_key
    assert "header-secret-value" not in stored_headers and "X-Api-Key" not in stored_headers


def test_repr_and_str_never_show_the_key():
    provider, _ = provider_upsert(name="p", base_url="https://x.test/v1", api_key=SECRET_KEY_VALUE)
    assert SECRET_KEY_VALUE not in repr(provider)
    assert SECRET_KEY_VALUE not in str(provider)
    assert provider.api_key_hint == "A key is set, ending in …WXYZ."


def test_rotation_re_encrypts_under_the_new_key(settings):
    old, new = generate_key(), generate_key()
    use_keys(settings, old)
    provider, _ = provider_upsert(name="p", base_url="https://x.test/v1", api_key=SECRET_KEY_VALUE)
    tool = ToolConfig.objects.create(name="rotating-tool", secrets='{"token": "tool-secret"}')
    before = raw("llms_provider", "api_key", provider.pk)

    # The new key alone cannot read the old token.
    use_keys(settings, new)
    with pytest.raises(ValueError):
        Provider.objects.get(pk=provider.pk)

    # New key first, old key kept: the old token still decrypts before rotation.
    use_keys(settings, new, old)
    assert Provider.objects.get(pk=provider.pk).api_key == SECRET_KEY_VALUE
    call_command("rotate_encryption_keys", stdout=io.StringIO())
    after = raw("llms_provider", "api_key", provider.pk)
    assert after != before and after.startswith("fernet:")

    # Old key dropped: everything (provider key and tool secrets alike) still decrypts.
    use_keys(settings, new)
    assert Provider.objects.get(pk=provider.pk).api_key == SECRET_KEY_VALUE
    assert ToolConfig.objects.get(pk=tool.pk).secrets_dict == {"token": "tool-secret"}


def test_rotation_reports_values_no_key_can_read(settings):
    use_keys(settings, generate_key())
    provider_upsert(name="p", base_url="https://x.test/v1", api_key=SECRET_KEY_VALUE)
    use_keys(settings, generate_key())
    with pytest.raises(CommandError, match="could not be decrypted"):
        call_command(
            "rotate_encryption_keys", "--check", stdout=io.StringIO(), stderr=io.StringIO()
        )
