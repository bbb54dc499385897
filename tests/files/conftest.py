"""Fixtures for the files tests: a media root and an upload folder of the test's own
(real files on disk, checked for leftovers), and API tokens."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def media(settings, tmp_path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "uploads")
    (tmp_path / "uploads").mkdir()
    return settings.MEDIA_ROOT


@pytest.fixture
def upload_dir(tmp_path) -> Path:
    return tmp_path / "uploads"


def blobs(media: Path) -> list[Path]:
    """Every file under the media root."""
    return sorted(path for path in media.rglob("*") if path.is_file())
