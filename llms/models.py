"""LLM providers (endpoints), the models users may pick, and token usage accounting.

Rows only describe data; the rules (exactly one default, who may use what, quotas) live in
:mod:`llms.services` and :mod:`llms.selectors`.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core.crypto import EncryptedTextField
from llms.providers import kind_choices

__all__ = [
    "ABILITY_FLAGS",
    "DEFAULT_BUDGET_TOKENS",
    "EmbeddingModel",
    "JSON_SCHEMA_DIALECTS",
    "MIN_BUDGET_TOKENS",
    "ROLES",
    "ROLE_LABELS",
    "LLMModel",
    "Provider",
    "RoleAssignment",
    "UsageQuota",
    "UsageRecord",
    "abilities_problem",
    "default_declared_abilities",
    "secret_hint",
    "validate_base_url",
]

# Boolean abilities the engine reads (engine.llm.base.ABILITY_NAMES), in display order.
ABILITY_FLAGS = ("tool_call", "tool_choice", "json_mode", "json_schema", "streaming", "vision")
# ``json_schema_dialect`` is the one non-boolean ability (engine.structured).
JSON_SCHEMA_DIALECTS = ("openai", "llamacpp")
ROLES = ("general", "fast", "reasoning")
# What an admin reads for each role (the API and plan steps use the names).
ROLE_LABELS = {"general": _("general"), "fast": _("fast"), "reasoning": _("reasoning")}
# ENGINE-NOTES "Context management": budget when unknown, and its floor.
DEFAULT_BUDGET_TOKENS = 32_000
MIN_BUDGET_TOKENS = 4_000


def default_declared_abilities() -> dict[str, Any]:
    """What a new model is assumed to do until declared or probed: plain streaming chat."""
    return {flag: flag == "streaming" for flag in ABILITY_FLAGS}


def validate_base_url(value: str) -> None:
    """http(s) with a host; lenient on purpose (``http://llama:8080/v1`` is fine)."""
    parts = urlsplit(value or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(
            gettext("Enter an http:// or https:// URL, e.g. https://api.openai.com/v1")
        )
    if parts.username or parts.password:
        # The URL is shown in lists and logs: credentials belong in the key or headers.
        raise ValidationError(
            gettext("Put credentials in the API key or extra headers, not the URL.")
        )


def secret_hint(secret: str | None, *, noun: str = "key") -> str:
    """What an admin may see of a secret: that it is set, and its last 4 characters.

    Short secrets show no characters at all: four characters of an eight-character
    secret would give away half of it.
    """
    # One sentence per noun (a translation may inflect it): "key" or "value".
    if noun == "value":
        if not secret:
            return gettext("No value set.")
        if len(secret) >= 12:
            return gettext("A value is set, ending in …%(end)s.") % {"end": secret[-4:]}
        return gettext("A value is set.")
    if not secret:
        return gettext("No key set.")
    if len(secret) >= 12:
        return gettext("A key is set, ending in …%(end)s.") % {"end": secret[-4:]}
    return gettext("A key is set.")


class Provider(models.Model):
    """One LLM endpoint. ``api_key`` and the extra headers are encrypted at rest."""

    name = models.CharField(verbose_name=_("name"), max_length=100, unique=True)
    kind = models.CharField(
        verbose_name=_("kind"), max_length=32, choices=kind_choices, default="openai"
    )
    base_url = models.CharField(
        _("base URL"),
        max_length=500,
        validators=[validate_base_url],
        help_text=_("Ends in /v1 for OpenAI-compatible servers, e.g. https://api.openai.com/v1"),
    )
    api_key = EncryptedTextField(_("API key"), blank=True)
    # JSON object of header name -> value, encrypted as a whole: such headers often carry
    # credentials (X-Api-Key, OpenAI-Organization), so every value is treated as a secret.
    extra_headers_secret = EncryptedTextField(_("extra headers (encrypted JSON)"), blank=True)
    timeout = models.FloatField(
        _("timeout (seconds)"), default=120.0, validators=[MinValueValidator(1.0)]
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("provider")
        verbose_name_plural = _("providers")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<Provider {self.pk}: {self.name} ({self.kind})>"

    @property
    def extra_headers(self) -> dict[str, str]:
        if not self.extra_headers_secret:
            return {}
        value = json.loads(self.extra_headers_secret)
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}

    @extra_headers.setter
    def extra_headers(self, value: dict[str, str] | None) -> None:
        self.extra_headers_secret = json.dumps(dict(value), sort_keys=True) if value else ""

    @property
    def api_key_hint(self) -> str:
        return secret_hint(self.api_key)

    @property
    def extra_headers_hint(self) -> str:
        names = sorted(self.extra_headers)
        if not names:
            return gettext("No extra headers set.")
        return gettext("Headers set: %(names)s (values hidden).") % {"names": ", ".join(names)}


class LLMModel(models.Model):
    """A model of a provider that users may pick (declared and probed abilities)."""

    provider = models.ForeignKey(
        Provider, verbose_name=_("provider"), on_delete=models.CASCADE, related_name="models"
    )
    model_id = models.CharField(_("API model id"), max_length=200)
    display_name = models.CharField(verbose_name=_("display name"), max_length=200, blank=True)
    abilities = models.JSONField(
        _("declared abilities"), default=default_declared_abilities, blank=True
    )
    context_window = models.PositiveIntegerField(
        verbose_name=_("context window"), null=True, blank=True, help_text=_("In tokens.")
    )
    max_output_tokens = models.PositiveIntegerField(
        verbose_name=_("max output tokens"), null=True, blank=True, help_text=_("In tokens.")
    )
    rewrite_answer = models.BooleanField(
        _("rewrite the answer after tools"),
        default=False,
        help_text=_(
            "After a run that used tools, a second streamed call rewrites the answer from the "
            "conversation and the tool results. Costs a call and delays the answer; for models "
            "whose answers after tools read poorly."
        ),
    )
    small = models.BooleanField(
        _("small model"),
        default=False,
        help_text=_(
            "For models of a few hundred million parameters (the bundled one): a short "
            "prompt with worked examples, actions without a reasoning field, one tool call "
            "whose result (or failure) is the answer, and ReAct mode even when Plan or Auto "
            "is chosen."
        ),
    )
    system_prompt = models.TextField(
        _("default system prompt"),
        blank=True,
        help_text=_(
            "Told to the agent in every chat with this model, before the user's "
            "instructions and the chat's own system prompt."
        ),
    )
    temperature_min = models.FloatField(
        verbose_name=_("temperature min"),
        default=0.0,
        help_text=_("Lowest temperature a chat may set."),
    )
    temperature_max = models.FloatField(
        verbose_name=_("temperature max"),
        default=2.0,
        help_text=_("Highest temperature a chat may set."),
    )
    top_p_min = models.FloatField(_("top_p min"), default=0.0)
    top_p_max = models.FloatField(_("top_p max"), default=1.0)
    input_price = models.DecimalField(
        _("input price"),
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        help_text=_("Per million prompt tokens; empty: not priced."),
    )
    output_price = models.DecimalField(
        _("output price"),
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        help_text=_("Per million completion tokens; empty: not priced."),
    )
    currency = models.CharField(
        verbose_name=_("currency"), max_length=3, default="USD", help_text=_("ISO 4217 code.")
    )
    roles = models.JSONField(verbose_name=_("roles"), default=list, blank=True)
    is_default = models.BooleanField(_("default"), default=False)
    enabled = models.BooleanField(verbose_name=_("enabled"), default=True)
    allowed_groups = models.ManyToManyField(
        Group,
        verbose_name=_("allowed groups"),
        blank=True,
        related_name="llm_models",
        help_text=_("Only members of these groups may use the model; none selected = everyone."),
    )
    verified_abilities = models.JSONField(
        verbose_name=_("verified abilities"), default=dict, blank=True, editable=False
    )
    probe_report = models.JSONField(
        verbose_name=_("probe report"), default=dict, blank=True, editable=False
    )
    probed_at = models.DateTimeField(
        verbose_name=_("probed at"), null=True, blank=True, editable=False
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), auto_now=True)

    class Meta:
        verbose_name_plural = _("LLM models")
        verbose_name = _("LLM model")
        ordering = ["provider__name", "display_name", "model_id"]
        constraints = [
            models.UniqueConstraint(fields=["provider", "model_id"], name="model_per_provider"),
            # The service keeps exactly one default; the database refuses a second one.
            models.UniqueConstraint(
                fields=["is_default"], condition=Q(is_default=True), name="one_default_model"
            ),
        ]

    def __str__(self) -> str:
        return self.display_name or self.model_id

    @property
    def budget_tokens(self) -> int:
        """Context budget for the engine's ContextGuard (ENGINE-NOTES numbers)."""
        if not self.context_window:
            return DEFAULT_BUDGET_TOKENS
        return max(MIN_BUDGET_TOKENS, self.context_window - (self.max_output_tokens or 0))

    def validate_constraints(self, exclude: Any = None) -> None:
        # Choosing a new default is valid: the services unset the old one in the same
        # transaction. The database constraint still refuses two defaults.
        super().validate_constraints(exclude={*(exclude or ()), "is_default"})

    def clean(self) -> None:
        errors: dict[str, str] = {}
        problem = abilities_problem(self.abilities)
        if problem:
            errors["abilities"] = problem
        roles = self.roles if isinstance(self.roles, list) else None
        if roles is None or any(role not in ROLES for role in roles):
            errors["roles"] = gettext("Roles must be a list drawn from: %(roles)s.") % {
                "roles": ", ".join(ROLES)
            }
        if not 0 <= self.temperature_min <= self.temperature_max:
            errors["temperature_max"] = gettext("The temperature range must run from 0 or more up.")
        if not 0 <= self.top_p_min <= self.top_p_max <= 1:
            errors["top_p_max"] = gettext(
                "The top_p range must lie within 0 to 1, its lowest first."
            )
        if errors:
            raise ValidationError(errors)


class EmbeddingModel(models.Model):
    """The model that turns knowledge passages and searches into vectors (an
    OpenAI-compatible ``/embeddings`` endpoint). Optional: without an enabled one,
    knowledge bases are searched by full text alone. At most one is enabled, so every
    stored vector comes from the same model (:mod:`knowledge.vectors`)."""

    provider = models.ForeignKey(
        Provider,
        verbose_name=_("provider"),
        on_delete=models.CASCADE,
        related_name="embedding_models",
    )
    model_id = models.CharField(
        _("API model id"),
        max_length=200,
        help_text=_("e.g. text-embedding-3-small, nomic-embed-text"),
    )
    dimensions = models.PositiveIntegerField(
        verbose_name=_("dimensions"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_(
            "Length of the vectors. Empty: what the model answers (found by a test call "
            "when saved). Set it only for models that can shorten theirs (OpenAI's text-"
            "embedding-3)."
        ),
    )
    batch_size = models.PositiveIntegerField(
        verbose_name=_("batch size"),
        default=64,
        validators=[MinValueValidator(1)],
        help_text=_("Passages sent per request while indexing."),
    )
    enabled = models.BooleanField(verbose_name=_("enabled"), default=True)
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("embedding model")
        verbose_name_plural = _("embedding models")
        ordering = ["provider__name", "model_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["enabled"],
                condition=Q(enabled=True),
                name="one_enabled_embedding_model",
                violation_error_message=_(
                    "Another embedding model is enabled: disable it first (vectors of two "
                    "models cannot be compared)."
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_id} ({self.provider})"

    @property
    def signature(self) -> str:
        """What a stored vector was made with: vectors of another signature are not
        comparable with this model's (:attr:`knowledge.models.Document.embedded_with`)."""
        return f"{self.pk}:{self.model_id}:{self.dimensions or 0}"


class RoleAssignment(models.Model):
    """The model plan steps asking for ``role`` get, for one group or for everyone.

    Who gets which row (and what "usable by the group" means) is decided in
    :func:`llms.selectors.role_models_for_user` and :func:`llms.services.role_assignment_check`.
    """

    role = models.CharField(
        verbose_name=_("role"), max_length=16, choices=[(role, ROLE_LABELS[role]) for role in ROLES]
    )
    group = models.ForeignKey(
        Group,
        verbose_name=_("group"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="llm_role_assignments",
        help_text=_("Empty = everyone: the fallback for users none of whose groups has one."),
    )
    model = models.ForeignKey(
        LLMModel, verbose_name=_("model"), on_delete=models.CASCADE, related_name="role_assignments"
    )

    class Meta:
        verbose_name = _("role assignment")
        verbose_name_plural = _("role assignments")
        ordering = ["role", "group__name"]
        constraints = [
            # NULLs are distinct in SQL unique constraints (nulls_distinct=False is
            # PostgreSQL 15+ only), hence two partial ones: one row per role and group,
            # and one "everyone" row per role.
            models.UniqueConstraint(
                fields=["role", "group"],
                condition=Q(group__isnull=False),
                name="role_per_group",
                violation_error_message=_("This group already has a model for this role."),
            ),
            models.UniqueConstraint(
                fields=["role"],
                condition=Q(group__isnull=True),
                name="role_for_everyone",
                violation_error_message=_("Everyone already has a model for this role."),
            ),
        ]

    def __str__(self) -> str:
        who = self.group or gettext("everyone")
        return gettext("%(role)s for %(who)s: %(model)s") % {
            "role": ROLE_LABELS.get(self.role, self.role),
            "who": who,
            "model": self.model,
        }


def abilities_problem(abilities: Any) -> str | None:
    """Why ``abilities`` is not a valid declaration, or None."""
    if not isinstance(abilities, dict):
        return gettext("Abilities must be a JSON object.")
    allowed = (*ABILITY_FLAGS, "json_schema_dialect")
    unknown = sorted(set(abilities) - set(allowed))
    if unknown:
        return gettext("Unknown abilities: %(unknown)s (allowed: %(allowed)s).") % {
            "unknown": ", ".join(unknown),
            "allowed": ", ".join(allowed),
        }
    for flag in ABILITY_FLAGS:
        if flag in abilities and not isinstance(abilities[flag], bool):
            return gettext("Ability %(flag)s must be true or false.") % {"flag": repr(flag)}
    dialect = abilities.get("json_schema_dialect")
    if dialect is not None and dialect not in JSON_SCHEMA_DIALECTS:
        return gettext("json_schema_dialect must be one of: %(dialects)s.") % {
            "dialects": ", ".join(JSON_SCHEMA_DIALECTS)
        }
    return None


class UsageRecord(models.Model):
    """Tokens and runs of one user with one model on one day (incremented in place)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="llm_usage",
    )
    model = models.ForeignKey(
        LLMModel,
        verbose_name=_("model"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="usage",
    )
    day = models.DateField(verbose_name=_("day"))
    prompt_tokens = models.PositiveBigIntegerField(verbose_name=_("prompt tokens"), default=0)
    completion_tokens = models.PositiveBigIntegerField(
        verbose_name=_("completion tokens"), default=0
    )
    total_tokens = models.PositiveBigIntegerField(verbose_name=_("total tokens"), default=0)
    # What the tokens cost at the model's prices when they were used (null: not priced).
    cost = models.DecimalField(
        verbose_name=_("cost"), max_digits=16, decimal_places=6, null=True, blank=True
    )
    currency = models.CharField(verbose_name=_("currency"), max_length=3, blank=True)
    runs = models.PositiveIntegerField(verbose_name=_("runs"), default=0)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("usage record")
        verbose_name_plural = _("usage records")
        ordering = ["-day", "user_id", "model_id"]
        constraints = [
            # NULLs are distinct in SQL unique constraints, hence two partial ones.
            models.UniqueConstraint(
                fields=["user", "model", "day"],
                condition=Q(model__isnull=False),
                name="usage_per_user_model_day",
            ),
            models.UniqueConstraint(
                fields=["user", "day"],
                condition=Q(model__isnull=True),
                name="usage_per_user_day_without_model",
            ),
        ]
        indexes = [models.Index(fields=["day", "user"], name="usage_day_user")]

    def __str__(self) -> str:
        model = self.model or gettext("(deleted model)")
        return f"{self.user} / {model} / {self.day}"


class UsageQuota(models.Model):
    """A daily token limit for a group or for one user; the smallest applicable wins."""

    group = models.OneToOneField(
        Group,
        verbose_name=_("group"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="token_quota",
    )
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="token_quota",
    )
    daily_token_limit = models.PositiveBigIntegerField(
        verbose_name=_("daily token limit"),
        help_text=_("Total tokens (prompt + completion) per day, across all models."),
    )

    class Meta:
        verbose_name = _("usage quota")
        verbose_name_plural = _("usage quotas")
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(group__isnull=False, user__isnull=True)
                    | Q(group__isnull=True, user__isnull=False)
                ),
                name="quota_for_group_xor_user",
            )
        ]

    def __str__(self) -> str:
        limit = f"{self.daily_token_limit:,}"
        if self.group_id:
            return gettext("%(limit)s tokens/day for group %(group)s") % {
                "limit": limit,
                "group": self.group,
            }
        return gettext("%(limit)s tokens/day for user %(user)s") % {
            "limit": limit,
            "user": self.user,
        }

    def clean(self) -> None:
        if bool(self.group_id) == bool(self.user_id):
            raise ValidationError(gettext("Choose either a group or a user (exactly one)."))
