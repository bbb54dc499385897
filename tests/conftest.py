"""Shared fixtures for the web tests (engine tests live in tests/engine and need no DB)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    """PBKDF2's deliberate slowness buys nothing in tests."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="pw-bob-123")


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_superuser(username="root", password="pw-root-123")


@pytest.fixture
def user_client(client, user):
    client.force_login(user)
    return client
