"""MCP servers: whole tool hubs an admin plugs in (stdio command or streamable HTTP URL).

Secrets (environment values, HTTP headers) are stored encrypted as JSON text; code reads
them through :attr:`MCPServer.env_dict` / :attr:`MCPServer.headers_dict`. The tool list is
cached on the row (``tools_cache``) so building a run's registry costs no connection; it
is refreshed by :func:`tools.mcp.services.mcp_server_refresh`.
"""

from __future__ import annotations

import json

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator, URLValidator
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core.crypto import EncryptedTextField

__all__ = ["MCPServer"]

_NAME_VALIDATOR = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_-]*$",
    _("Letters, digits, _ and - only (it prefixes the tool names the model sees)."),
)


def _json_object(text: str) -> dict[str, str]:
    if not text:
        return {}
    value = json.loads(text)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


class MCPServer(models.Model):
    class Transport(models.TextChoices):
        STDIO = "stdio", _("stdio (local command)")
        HTTP = "http", _("Streamable HTTP")

    class Health(models.TextChoices):
        UNKNOWN = "unknown", _("Unknown")
        OK = "ok", _("Ok")
        ERROR = "error", _("Error")

    name = models.CharField(
        verbose_name=_("name"),
        max_length=40,
        unique=True,
        validators=[_NAME_VALIDATOR],
        help_text=_(
            "Short name; the model sees its tools as name__tool (a server “github” "
            "with a tool “search”: github__search)."
        ),
    )
    description = models.CharField(verbose_name=_("description"), max_length=300, blank=True)
    transport = models.CharField(
        verbose_name=_("transport"),
        max_length=8,
        choices=Transport.choices,
        default=Transport.STDIO,
    )
    command = models.CharField(
        verbose_name=_("command"), max_length=500, blank=True, help_text=_("stdio: the executable.")
    )
    args = models.JSONField(
        verbose_name=_("args"),
        default=list,
        blank=True,
        help_text=_("stdio: a JSON list of arguments."),
    )
    env = EncryptedTextField(
        verbose_name=_("env"),
        blank=True,
        default="",
        help_text=_("stdio: JSON object (encrypted)."),
    )
    url = models.CharField(
        verbose_name=_("url"),
        max_length=500,
        blank=True,
        help_text=_("http: the MCP endpoint URL."),
    )
    headers = EncryptedTextField(
        verbose_name=_("headers"),
        blank=True,
        default="",
        help_text=_("http: JSON object (encrypted)."),
    )
    timeout = models.FloatField(
        verbose_name=_("timeout"),
        default=30.0,
        help_text=_("Seconds for connecting and each call."),
    )
    enabled = models.BooleanField(verbose_name=_("enabled"), default=True)
    requires_confirmation = models.BooleanField(
        verbose_name=_("requires confirmation"),
        default=False,
        help_text=_("Every call of this server's tools waits for the user's approval in the chat."),
    )
    # Adds to the switch above, never takes from it: with it on, every tool asks (those the
    # server adds later too); with it off, only these do.
    confirm_tools = models.JSONField(
        default=list,
        blank=True,
        verbose_name=_("tools that require confirmation"),
        help_text=_(
            "The server's own tool names whose every call waits for the user's "
            "approval, when the switch above is off."
        ),
    )
    allowed_groups = models.ManyToManyField(
        "auth.Group",
        verbose_name=_("allowed groups"),
        blank=True,
        related_name="mcp_servers",
        help_text=_("Empty: every user may use this server's tools."),
    )
    health_status = models.CharField(
        verbose_name=_("health status"),
        max_length=8,
        choices=Health.choices,
        default=Health.UNKNOWN,
        editable=False,
    )
    last_checked_at = models.DateTimeField(
        verbose_name=_("last checked at"), null=True, blank=True, editable=False
    )
    last_error = models.TextField(verbose_name=_("last error"), blank=True, editable=False)
    tools_cache = models.JSONField(
        verbose_name=_("tools cache"), null=True, blank=True, editable=False
    )
    tools_refreshed_at = models.DateTimeField(
        verbose_name=_("tools refreshed at"), null=True, blank=True, editable=False
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), auto_now=True)

    class Meta:
        verbose_name_plural = _("MCP servers")
        ordering = ["name"]
        verbose_name = _("MCP server")

    def __str__(self) -> str:
        return self.name

    @property
    def env_dict(self) -> dict[str, str]:
        return _json_object(self.env)

    @env_dict.setter
    def env_dict(self, value: dict[str, str]) -> None:
        self.env = json.dumps(value) if value else ""

    @property
    def headers_dict(self) -> dict[str, str]:
        return _json_object(self.headers)

    @headers_dict.setter
    def headers_dict(self, value: dict[str, str]) -> None:
        self.headers = json.dumps(value) if value else ""

    def tool_requires_confirmation(self, tool_name: str) -> bool:
        """Whether every call of the server's tool ``tool_name`` (its own name, not the
        ``<server>__<tool>`` the model sees) waits for the user's approval."""
        return self.requires_confirmation or tool_name in (self.confirm_tools or [])

    @property
    def tool_count(self) -> int:
        return len(self.tools_cache or [])

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.transport == self.Transport.STDIO and not self.command.strip():
            errors["command"] = gettext("A stdio server needs a command.")
        if self.transport == self.Transport.HTTP:
            try:
                URLValidator(schemes=["http", "https"])(self.url)
            except ValidationError:
                errors["url"] = gettext("An HTTP server needs an http(s) URL.")
        if not isinstance(self.args, list) or not all(isinstance(a, str) for a in self.args):
            errors["args"] = gettext("Arguments must be a JSON list of strings.")
        tools = self.confirm_tools
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            errors["confirm_tools"] = gettext(
                "Tools that require confirmation: a list of tool names."
            )
        if errors:
            raise ValidationError(errors)
