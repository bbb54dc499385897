"""The admin's settings for one registered tool (one row per ``ToolSpec`` name).

Rows are created lazily by :func:`tools.services.toolconfig_sync` for every spec the code
registers. Settings the spec's ``config_schema`` marks ``"x-secret": true`` never live in
the plain ``config`` JSON: they are kept encrypted in ``secrets`` and merged back by
:meth:`ToolConfig.effective_config`.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core.crypto import EncryptedTextField
from tools.registry import ToolSpec, get_spec

__all__ = ["ToolConfig"]


def secret_keys(spec: ToolSpec | None) -> list[str]:
    """Top-level config keys the spec marks ``"x-secret": true``, in schema order."""
    if spec is None:
        return []
    properties = (spec.config_schema or {}).get("properties") or {}
    return [
        key for key, prop in properties.items() if isinstance(prop, dict) and prop.get("x-secret")
    ]


def config_schema_errors(spec: ToolSpec, config: dict[str, Any]) -> list[str]:
    """Readable messages for every way ``config`` violates the spec's schema."""
    schema = spec.config_schema or {"type": "object"}
    validator_cls = jsonschema.validators.validator_for(schema)
    validator = validator_cls(schema)
    messages = []
    for error in sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in error.absolute_path)
        message = error.message
        if where in secret_keys(spec):
            message = gettext("invalid value (hidden: it is a secret)")  # never echo a secret back
        messages.append(f"{where}: {message}" if where else message)
    return messages


class ToolConfig(models.Model):
    name = models.CharField(
        verbose_name=_("name"),
        max_length=100,
        unique=True,
        help_text=_("The registered tool's name."),
    )
    enabled = models.BooleanField(verbose_name=_("enabled"), default=True)
    description_override = models.TextField(
        verbose_name=_("description override"),
        blank=True,
        help_text=_("Replaces the description the model sees; empty = the tool's own."),
    )
    config = models.JSONField(
        verbose_name=_("config"),
        default=dict,
        blank=True,
        help_text=_("Settings, validated against the tool's schema."),
    )
    secrets = EncryptedTextField(
        verbose_name=_("secrets"), blank=True, help_text=_("Encrypted JSON of the secret settings.")
    )
    allowed_groups = models.ManyToManyField(
        Group,
        verbose_name=_("allowed groups"),
        blank=True,
        related_name="tool_configs",
        help_text=_("Only members of these groups may use the tool; none selected = everyone."),
    )
    requires_confirmation = models.BooleanField(
        verbose_name=_("requires confirmation"),
        default=False,
        help_text=_("The user must confirm each call before the tool runs."),
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), auto_now=True)

    class Meta:
        verbose_name_plural = _("tools")
        ordering = ["name"]
        verbose_name = _("tool")

    def __str__(self) -> str:
        return self.name

    @property
    def spec(self) -> ToolSpec | None:
        return get_spec(self.name)

    @property
    def registered(self) -> bool:
        return self.spec is not None

    @property
    def secrets_dict(self) -> dict[str, Any]:
        if not self.secrets:
            return {}
        value = json.loads(self.secrets)
        return value if isinstance(value, dict) else {}

    @secrets_dict.setter
    def secrets_dict(self, value: dict[str, Any] | None) -> None:
        cleaned = {k: v for k, v in (value or {}).items() if v not in (None, "")}
        self.secrets = json.dumps(cleaned, sort_keys=True) if cleaned else ""

    def effective_config(self) -> dict[str, Any]:
        """Spec defaults, overlaid by the admin's config, overlaid by the secrets."""
        spec = self.spec
        defaults = dict(spec.default_config) if spec is not None else {}
        return {**defaults, **(self.config or {}), **self.secrets_dict}

    def clean(self) -> None:
        if not isinstance(self.config, dict):
            raise ValidationError({"config": gettext("The configuration must be a JSON object.")})
        spec = self.spec
        if spec is None:
            return  # the code no longer registers this tool: nothing to validate against
        leaked = sorted(set(self.config) & set(secret_keys(spec)))
        if leaked:
            raise ValidationError(
                {
                    "config": gettext(
                        "Secret settings belong in the secret fields, not here: %(names)s."
                    )
                    % {"names": leaked}
                }
            )
        problems = config_schema_errors(spec, self.effective_config())
        if problems:
            raise ValidationError({"config": problems})
