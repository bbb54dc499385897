"""Fixtures for the core's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.crypto import reset_cache


@pytest.fixture(autouse=True)
def _fresh_encryption_keys() -> Iterator[None]:
    """Tests change ENCRYPTION_KEYS; never let a cached key set leak between tests."""
    reset_cache()
    yield
    reset_cache()
