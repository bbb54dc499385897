"""LLM providers (endpoints) and the models users may pick."""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db import models


class Provider(models.Model):
    class Kind(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible"

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=32, choices=Kind.choices, default=Kind.OPENAI)
    base_url = models.URLField(max_length=500)
    extra_headers = models.JSONField(default=dict, blank=True)
    timeout = models.FloatField(default=120.0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.name


class LLMModel(models.Model):
    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="models")
    model_id = models.CharField("API model id", max_length=200)
    display_name = models.CharField(max_length=200, blank=True)
    abilities = models.JSONField(default=dict, blank=True)
    context_window = models.PositiveIntegerField(null=True, blank=True)
    max_output_tokens = models.PositiveIntegerField(null=True, blank=True)
    roles = models.JSONField(default=list, blank=True)
    is_default = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    allowed_groups = models.ManyToManyField(Group, blank=True, related_name="llm_models")

    class Meta:
        ordering = ["provider__name", "display_name", "model_id"]
        constraints = [
            models.UniqueConstraint(fields=["provider", "model_id"], name="model_per_provider")
        ]

    def __str__(self) -> str:
        return self.display_name or self.model_id
