from __future__ import annotations

from django.apps import AppConfig


class FilesConfig(AppConfig):
    """Users' own files: attachments of messages and documents of knowledge bases."""

    name = "files"
    verbose_name = "Files"
