"""Files tools produced during a run (HTML/markdown previews, images, CSV...).

Stored per conversation under ``MEDIA_ROOT/artifacts/<conversation_id>/`` with a random
directory per file, served only to the conversation's owner by :mod:`tools.views`.
Quotas are enforced by :func:`tools.artifacts.artifact_save`, not here.
"""

from __future__ import annotations

import secrets

from django.db import models
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.utils.text import get_valid_filename
from django.utils.translation import gettext_lazy as _

__all__ = ["INLINE_IMAGE_TYPES", "Artifact", "artifact_upload_to"]

# Raster types a browser renders without running anything; SVG is shown as source.
INLINE_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def artifact_upload_to(instance: Artifact, filename: str) -> str:
    try:
        safe = get_valid_filename(filename.rsplit("/", 1)[-1])[:120]
    except Exception:  # SuspiciousFileOperation for names like ".."
        safe = "artifact"
    return f"artifacts/{instance.conversation_id}/{secrets.token_hex(8)}/{safe}"


class Artifact(models.Model):
    conversation = models.ForeignKey(
        "conversations.Conversation",
        verbose_name=_("conversation"),
        on_delete=models.CASCADE,
        related_name="artifacts",
    )
    run = models.ForeignKey(
        "conversations.Run",
        verbose_name=_("run"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="artifacts",
    )
    tool_name = models.CharField(verbose_name=_("tool name"), max_length=128, blank=True)
    name = models.CharField(verbose_name=_("name"), max_length=255)
    mime_type = models.CharField(
        verbose_name=_("mime type"), max_length=127, default="application/octet-stream"
    )
    size = models.PositiveBigIntegerField(verbose_name=_("size"), default=0)
    file = models.FileField(verbose_name=_("file"), upload_to=artifact_upload_to, max_length=500)
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("artifact")
        verbose_name_plural = _("artifacts")
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["run", "created_at"])]

    def __str__(self) -> str:
        return self.name

    @property
    def kind(self) -> str:
        """How the UI previews it: html, markdown, image, text, or file (download only)."""
        mime = self.mime_type.lower()
        if mime in ("text/html", "application/xhtml+xml"):
            return "html"
        if mime in ("text/markdown", "text/x-markdown"):
            return "markdown"
        if mime.startswith("image/"):
            return "image"
        if mime.startswith("text/") or mime in ("application/json", "text/csv"):
            return "text"
        return "file"

    @property
    def inline_image(self) -> bool:
        return self.mime_type.lower() in INLINE_IMAGE_TYPES


@receiver(post_delete, sender=Artifact)
def _artifact_delete_file(sender, instance: Artifact, **kwargs) -> None:
    """Rows go away with their conversation; their files must too."""
    if instance.file:
        instance.file.delete(save=False)
