"""A user's stored files. Business rules live in :mod:`files.services`."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models, transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver


def blob_path(instance: StoredFile, filename: str) -> str:
    """Where the bytes go under MEDIA_ROOT: by owner and a random name, never the
    uploaded name (which is only shown)."""
    return f"files/{instance.owner_id}/{uuid.uuid4().hex}"


class StoredFile(models.Model):
    """One uploaded file of one user: its bytes on disk, what it is (checked from the
    content, not the name) and, for documents, the text extracted from it."""

    class Kind(models.TextChoices):
        TEXT = "text", "Text"  # plain text, Markdown, code, CSV, JSON, HTML
        PDF = "pdf", "PDF"
        DOCX = "docx", "Word document"
        IMAGE = "image", "Image"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="stored_files"
    )
    name = models.CharField(max_length=255)  # sanitised, for display and downloads
    kind = models.CharField(max_length=8, choices=Kind.choices)
    content_type = models.CharField(max_length=100)  # from the content
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    blob = models.FileField(upload_to=blob_path, max_length=200)
    # Extracted text (documents); "" for images. ``pages``: for a PDF, the offset in
    # ``text`` where each page starts, so a passage can say its page.
    text = models.TextField(blank=True)
    pages = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "created_at"], name="file_owner_created")]

    def __str__(self) -> str:
        return self.name


@receiver(post_delete, sender=StoredFile)
def _delete_blob(sender: type[StoredFile], instance: StoredFile, **kwargs: object) -> None:
    """However a row goes (the API, its conversation, its owner's account), its bytes go
    too: once the deletion is committed, so a rolled-back one keeps them."""
    name, storage = instance.blob.name, instance.blob.storage
    if name:
        transaction.on_commit(lambda: storage.delete(name))
