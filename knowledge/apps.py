from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class KnowledgeConfig(AppConfig):
    """Knowledge bases: users' collections of documents, chunked and searchable."""

    name = "knowledge"
    verbose_name = _("Knowledge bases")

    def ready(self) -> None:
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_migrate

        # Models load once the registry is ready (the app's ready()).
        from knowledge import fulltext, vectors

        post_migrate.connect(fulltext.ensure_after_migrate, sender=self)
        connection_created.connect(vectors.load_sqlite_extension)
