from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class FilesConfig(AppConfig):
    """Users' own files: attachments of messages and documents of knowledge bases."""

    name = "files"
    verbose_name = _("Files")
