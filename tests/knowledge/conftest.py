"""Fixtures for the knowledge tests: a media root of the test's own, bases with indexed
documents, API tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge import indexing, services
from knowledge.models import Document, KnowledgeBase


@pytest.fixture(autouse=True)
def media(settings, tmp_path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def add_indexed(base: KnowledgeBase, name: str, data: bytes | str) -> Document:
    """A document added and indexed now (the test's transaction never commits, so the
    background scheduling on commit does not run)."""
    if isinstance(data, str):
        data = data.encode()
    document = services.document_add(base, SimpleUploadedFile(name, data))
    assert indexing.index_document(document.pk) == "ready", document.error
    document.refresh_from_db()
    return document
