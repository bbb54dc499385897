"""The core's one table: the version stamp of the admin-managed configuration."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class ConfigVersion(models.Model):
    """One row whose token changes whenever admin-managed run configuration changes.

    Processes cache the models, tools and MCP servers a run needs
    (:mod:`core.configcache`) and compare this token before trusting their copy. It is
    written in the same transaction as the change, so a reader sees the new token exactly
    when it can see the new rows.
    """

    token = models.CharField(max_length=32)

    class Meta:
        verbose_name_plural = _("configuration versions")
        verbose_name = _("configuration version")

    def __str__(self) -> str:
        return self.token
