"""A user's stored files. Business rules live in :mod:`files.services`."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models, transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.utils.translation import gettext_lazy as _


def blob_path(instance: StoredFile, filename: str) -> str:
    """Where the bytes go under MEDIA_ROOT: by owner and a random name, never the
    uploaded name (which is only shown)."""
    return f"files/{instance.owner_id}/{uuid.uuid4().hex}"


class StoredFile(models.Model):
    """One uploaded file of one user: its bytes on disk, what it is (checked from the
    content, not the name) and, for documents, the text extracted from it."""

    class Kind(models.TextChoices):
        TEXT = "text", _("Text")  # plain text, Markdown, code, CSV, JSON, HTML
        PDF = "pdf", _("PDF")
        DOCX = "docx", _("Word document")
        IMAGE = "image", _("Image")

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="stored_files",
    )
    name = models.CharField(
        verbose_name=_("name"), max_length=255
    )  # sanitised, for display and downloads
    kind = models.CharField(verbose_name=_("kind"), max_length=8, choices=Kind.choices)
    content_type = models.CharField(
        verbose_name=_("content type"), max_length=100
    )  # from the content
    size = models.PositiveBigIntegerField(verbose_name=_("size"))
    sha256 = models.CharField(verbose_name=_("sha256"), max_length=64)
    blob = models.FileField(verbose_name=_("blob"), upload_to=blob_path, max_length=200)
    # Extracted text (documents); "" for images. ``pages``: for a PDF, the offset in
    # ``text`` where each page starts, so a passage can say its page.
    text = models.TextField(verbose_name=_("text"), blank=True)
    pages = models.JSONField(verbose_name=_("pages"), default=list, blank=True)
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("stored file")
        verbose_name_plural = _("stored files")
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
